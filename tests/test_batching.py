"""Token-budget batches of similar lengths, fixed-size random batches, and teacher-forcing collation."""

import numpy as np
import pytest

from seqlab.data.batching import collate, length_batches, pad, random_batches
from seqlab.data.inputs import source_ids
from seqlab.specials import EOS, PAD, SOS


@pytest.fixture
def lengths():
    rng = np.random.default_rng(0)
    return rng.integers(3, 40, 2000).tolist(), rng.integers(2, 30, 2000).tolist()


def test_every_sentence_once_and_within_budget(lengths):
    src, trg = lengths
    batches = length_batches(src, trg, batch_tokens=1000, seed=1)
    assert sorted(np.concatenate(batches).tolist()) == list(range(2000))
    for b in batches:
        cost = len(b) * (max(src[i] for i in b) + max(trg[i] for i in b) + 1)
        assert cost <= 1000 or len(b) == 1


def test_grouping_by_length_saves_padding(lengths):
    src, trg = lengths

    def padded(batches):
        return sum(len(b) * max(src[i] for i in b) for b in batches)

    grouped = length_batches(src, trg, batch_tokens=1000, seed=1)
    shuffled = np.array_split(np.random.default_rng(1).permutation(2000), len(grouped))
    assert padded(grouped) < 0.7 * padded(shuffled)
    assert padded(grouped) < 1.1 * sum(src)


def test_order_is_fixed_by_seed(lengths):
    src, trg = lengths
    a = length_batches(src, trg, 1000, seed=5)
    b = length_batches(src, trg, 1000, seed=5)
    c = length_batches(src, trg, 1000, seed=6)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(a, c))


def test_an_overlong_sentence_gets_its_own_batch():
    batches = length_batches([5, 500, 6], [5, 5, 5], batch_tokens=100, seed=0)
    assert [1] in [b.tolist() for b in batches]


def test_random_batches_have_the_size_and_mix_lengths(lengths):
    src, _ = lengths
    batches = random_batches(2000, 128, seed=3)
    assert [len(b) for b in batches] == [128] * 15 + [80]
    assert sorted(np.concatenate(batches).tolist()) == list(range(2000))
    spread = [max(src[i] for i in b) - min(src[i] for i in b) for b in batches]
    assert min(spread) > 20  # not sorted by length: every batch mixes short and long sentences


def test_random_batches_are_fixed_by_seed():
    a, b, c = random_batches(500, 64, seed=1), random_batches(500, 64, seed=1), random_batches(500, 64, seed=2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])


def test_collate_shifts_targets_for_teacher_forcing():
    batch = collate([source_ids([5, 6, 7]), source_ids([8])], [[9, 10], [11, 12, 13]])
    assert batch.src.tolist() == [[5, 6, 7, EOS], [8, EOS, PAD, PAD]]
    assert batch.trg_in.tolist() == [[SOS, 9, 10, PAD], [SOS, 11, 12, 13]]
    assert batch.trg_out.tolist() == [[9, 10, EOS, PAD], [11, 12, 13, EOS]]
    assert batch.num_target_tokens == 7


def test_a_source_ends_with_eos_or_as_the_book_is_padded_to_a_fixed_width():
    assert source_ids([5, 6]) == [5, 6, EOS]
    assert source_ids([5, 6], eos=False) == [5, 6]
    assert source_ids([5, 6], eos=False, width=4, fill=9) == [5, 6, 9, 9]
    assert source_ids([5, 6], width=4) == [5, 6, EOS, PAD]
    assert source_ids([5, 6, 7, 8], eos=False, width=4, fill=9) == [5, 6, 7, 8]


def test_pad_right_pads_with_zero():
    assert pad([[1], [2, 3, 4]]).tolist() == [[1, 0, 0], [2, 3, 4]]


def test_windowed_batches_of_one_chunk_are_length_batches_and_of_more_stay_in_their_window():
    import numpy as np

    from seqlab.data.batching import length_batches, windowed_batches

    rng = np.random.default_rng(0)
    src, trg = rng.integers(1, 30, 1000), rng.integers(1, 30, 1000)
    whole = windowed_batches(src, trg, [1000], 4, 200, seed=7)
    assert [b.tolist() for b in whole] == [b.tolist() for b in length_batches(src, trg, 200, seed=7)]
    chunks = [100] * 9 + [100]
    batches = windowed_batches(src, trg, chunks, 3, 200, seed=7)
    assert sorted(np.concatenate(batches).tolist()) == list(range(1000))  # every row once
    assert all(len(b) * (src[b].max() + trg[b].max() + 1) <= 200 or len(b) == 1 for b in batches)
    window_of = [frozenset(int(i) // 100 for i in b) for b in batches]
    groups: list[set[int]] = []
    for chunks_of_batch in window_of:
        if groups and len(groups[-1] | chunks_of_batch) <= 3:
            groups[-1] |= chunks_of_batch
        else:
            groups.append(set(chunks_of_batch))
    assert [len(g) for g in groups] == [3, 3, 3, 1] and set().union(*groups) == set(range(10))
    again = windowed_batches(src, trg, chunks, 3, 200, seed=7)
    other = windowed_batches(src, trg, chunks, 3, 200, seed=8)
    assert [b.tolist() for b in again] == [b.tolist() for b in batches] != [b.tolist() for b in other]

"""Token-budget batches of similar lengths, fixed-size random batches, and teacher-forcing collation."""

import numpy as np
import pytest

from seqlab.data.batching import InMemory, Lengths, collate, length_batches, pad, random_batches, windowed_batches
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


def _chunked(values: np.ndarray, chunk: int) -> Lengths:
    """Lengths read in chunks of ``chunk`` rows (as a prepared column's), the chunks read recorded in ``.read``."""

    class Chunked:
        def __init__(self) -> None:
            self.read: list[int] = []

        def chunk_rows(self) -> list[int]:
            return [chunk] * (len(values) // chunk)

        def lengths(self, chunks: np.ndarray) -> np.ndarray:
            self.read += chunks.tolist()
            return np.concatenate([values[c * chunk:(c + 1) * chunk] for c in chunks])

    return Chunked()


def _windows(batches: list[np.ndarray], rows: int, window: int) -> list[set[int]]:
    """The chunks (of ``rows`` rows) that each run of batches drew from, a new set where a batch leaves the
    last set's ``window`` chunks."""
    groups: list[set[int]] = []
    for chunks_of_batch in ({int(i) // rows for i in b} for b in batches):
        if groups and len(groups[-1] | chunks_of_batch) <= window:
            groups[-1] |= chunks_of_batch
        else:
            groups.append(set(chunks_of_batch))
    return groups


def test_windowed_batches_of_one_chunk_are_length_batches_and_of_more_stay_in_their_window():
    rng = np.random.default_rng(0)
    src, trg = rng.integers(1, 30, 1000), rng.integers(1, 30, 1000)
    [whole] = windowed_batches(InMemory(src), InMemory(trg), 4, 200, seed=7)
    assert [b.tolist() for b in whole] == [b.tolist() for b in length_batches(src, trg, 200, seed=7)]
    [stream] = windowed_batches(_chunked(src, 100), _chunked(trg, 100), 3, 200, seed=7)
    batches = list(stream)
    assert len(stream) == len(batches) and sorted(np.concatenate(batches).tolist()) == list(range(1000))  # each once
    assert all(len(b) * (src[b].max() + trg[b].max() + 1) <= 200 or len(b) == 1 for b in batches)
    groups = _windows(batches, 100, 3)
    assert [len(g) for g in groups] == [3, 3, 3, 1] and set().union(*groups) == set(range(10))
    [again] = windowed_batches(_chunked(src, 100), _chunked(trg, 100), 3, 200, seed=7)
    [other] = windowed_batches(_chunked(src, 100), _chunked(trg, 100), 3, 200, seed=8)
    assert [b.tolist() for b in again] == [b.tolist() for b in batches] != [b.tolist() for b in other]


def test_a_stream_reads_a_window_when_it_reaches_it_and_each_part_of_a_step_its_own_chunks():
    src = np.random.default_rng(1).integers(1, 30, 1000)
    lengths = _chunked(src, 100)
    [stream] = windowed_batches(lengths, None, 3, 200, seed=7)
    next(iter(stream))
    assert len(lengths.read) == 3  # type: ignore[attr-defined]  # the first window's lengths, not the split's
    streams = windowed_batches(_chunked(src, 100), None, 2, 200, seed=7, parts=2)
    chunks = [{int(i) // 100 for b in s for i in b} for s in streams]
    assert len(streams) == 2 and chunks[0] | chunks[1] == set(range(10)) and not chunks[0] & chunks[1]
    assert [len(c) for c in chunks] == [5, 5] and all(len(_windows(list(s), 100, 2)) == 3 for s in streams)
    assert sorted(i for s in streams for b in s for i in b.tolist()) == list(range(1000))  # every row once
    next_epoch = windowed_batches(_chunked(src, 100), None, 2, 200, seed=8, parts=2)
    assert [{int(i) // 100 for b in s for i in b} for s in next_epoch] == chunks  # each part keeps its chunks
    assert [b.tolist() for b in next_epoch[0]] != [b.tolist() for b in streams[0]]  # in another order
    assert len(windowed_batches(_chunked(src, 100), None, 2, 200, seed=7, parts=11)) == 1  # fewer chunks than parts

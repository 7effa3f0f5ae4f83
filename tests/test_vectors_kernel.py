"""word2vec's compiled kernel: one update against autograd and torch's SGD, the window, subsampling and negative
draws against their definitions, and training on several threads."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from seqlab.vectors import kernel
from seqlab.vectors.word2vec import NegativeSamplingWord2Vec, UnigramSampler, alias_table


@pytest.mark.parametrize("cbow", [True, False])
def test_one_update_is_autograd_and_sgd_on_the_models_loss(cbow):
    """The hand-written backward of ``kernel.update`` against autograd on NegativeSamplingWord2Vec's summed loss
    (CBOW: every context row gets the mean's whole gradient) and one step of torch's SGD."""
    model = NegativeSamplingWord2Vec(12, 5, cbow=cbow, generator=torch.Generator().manual_seed(4))
    reference = NegativeSamplingWord2Vec(12, 5, cbow=cbow)
    reference.load_state_dict(model.state_dict())
    inputs = np.array([0, 3, 3, 7]) if cbow else np.array([3])
    words = np.array([1, 4, 9, 2, 6])  # the positive word first (a negative drawn twice would see its first update)
    w_in, w_out = model.w_in.weight.detach().numpy(), model.w_out.weight.detach().numpy()
    h = w_in[inputs].mean(axis=0) if cbow else w_in[inputs[0]].copy()
    none = np.empty((0, 5), np.float32)  # no rows of either table in a copy
    loss = kernel.update(w_in, w_out, none, none, h, np.empty(5, np.float32), inputs, len(inputs), words, len(words),
                         0.1)

    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    given = torch.as_tensor(inputs)[None] if cbow else torch.as_tensor(inputs)
    expected = reference(given, torch.tensor([1]), torch.as_tensor(words[None, 1:]))  # the mean over 1 example
    expected.backward()
    optimizer.step()
    assert loss == pytest.approx(expected.item(), rel=1e-5)
    assert np.allclose(w_in, reference.w_in.weight.detach().numpy(), atol=1e-6)
    assert np.allclose(w_out, reference.w_out.weight.detach().numpy(), atol=1e-6)
    assert not np.allclose(w_out, NegativeSamplingWord2Vec(12, 5, cbow=cbow, generator=torch.Generator().manual_seed(4))
                           .w_out.weight.detach().numpy())  # it moved


def _train(sentences, window, cbow, sample_keep=None, seed=1, negative=2, dim=4, own_rows=0, tables=None,
           clock=None, interleave=1, alpha_end=0.0001):
    """``train_job`` over ``sentences`` (lists of ids) with fresh tables (or ``tables``, W_in and W_out, moved in
    place), ``interleave`` of them side by side, each table's first ``own_rows`` in a copy merged by ``clock``
    (default: only at the end), the rate falling from 0.025 to ``alpha_end``; returns (loss, examples)."""
    vocab = 1 + max(max(s) for s in sentences)
    ids = np.concatenate([np.asarray(s, dtype=np.int64) for s in sentences])
    bounds = np.concatenate([[0], np.cumsum([len(s) for s in sentences])])
    keep_word = np.ones(vocab) if sample_keep is None else sample_keep
    keep, alias = alias_table(np.full(vocab, 1 / vocab))
    rng = np.random.default_rng(0)
    w_in, w_out = tables or ((0.01 * rng.standard_normal((vocab, dim))).astype(np.float32),
                             np.zeros((vocab, dim), np.float32))
    copy_in, copy_out = np.stack([w_in[:own_rows]] * 2), np.stack([w_out[:own_rows]] * 2)
    clock = np.array([0, 0, 0, len(ids) + 1, 0]) if clock is None else clock
    done = kernel.train_job(w_in, w_out, copy_in, copy_out, clock, ids, bounds, np.arange(len(sentences)), keep_word,
                            keep, alias, cbow, window, negative, interleave, 0.025, alpha_end, np.uint64(seed))
    kernel.merge(w_in, copy_in, own_rows)
    kernel.merge(w_out, copy_out, own_rows)
    return done


def test_the_hottest_rows_merge_on_a_clock_of_their_own():
    """``clock`` is (words since the hottest rows merged, words between their merges, words since every copied row
    merged, words between those, how many rows are the hottest): a copy's change reaches the table for the hottest
    rows alone when their count is reached, for every row when the other count is, and not before."""
    tables = np.zeros((3, 2), np.float32), np.zeros((3, 2), np.float32)
    copies = np.zeros((2, 3, 2), np.float32), np.zeros((2, 2, 2), np.float32)  # W_in: 3 rows copied, W_out: 2

    def due(clock: list[int]) -> list[int]:
        for copy in copies:
            copy[0] += 1  # every copied row changed by 1 since the copies last merged
        counts = np.array(clock)
        kernel._merge_due(*tables, *copies, counts)
        return list(counts)

    assert due([3, 4, 3, 10, 1]) == [3, 4, 3, 10, 1]  # neither count reached
    assert not tables[0].any() and not tables[1].any()
    assert due([4, 4, 4, 10, 1]) == [0, 4, 4, 10, 1]  # the hottest row: both changes reach it
    assert tables[0][:, 0].tolist() == [2, 0, 0] and tables[1][:, 0].tolist() == [2, 0, 0]
    assert due([1, 4, 10, 10, 1]) == [0, 4, 0, 10, 1]  # every copied row, the hottest too
    assert tables[0][:, 0].tolist() == [3, 3, 3] and tables[1][:, 0].tolist() == [3, 3, 0]
    assert np.array_equal(copies[0][0], tables[0]) and np.array_equal(copies[0][1], tables[0])


def test_a_merge_of_changed_rows_leaves_the_others_as_they_are_in_table_and_copy():
    """``merge(..., changed=True)``: a row the copy changed adds its change and reads the table afresh; a row it did
    not change is neither written to the table nor refreshed from it (the other worker's change to it waits for
    a full merge)."""
    table = np.zeros((3, 2), np.float32)
    copy = np.zeros((2, 3, 2), np.float32)
    copy[0, 0] += 1.0  # this worker changed row 0
    table[:, :] += 5.0  # the other worker merged a change into every row
    kernel.merge(table, copy, 3, True)
    assert table[:, 0].tolist() == [6.0, 5.0, 5.0]  # row 0: both changes; rows 1, 2 as the other left them
    assert copy[0][:, 0].tolist() == copy[1][:, 0].tolist() == [6.0, 0.0, 0.0]  # rows 1, 2 not read afresh
    kernel.merge(table, copy, 3)
    assert np.array_equal(copy[0], table) and np.array_equal(copy[1], table) and table[:, 0].tolist() == [6.0, 5.0, 5.0]


def test_a_window_of_one_stays_in_its_sentence():
    """Window 1: every word with each neighbour in its own sentence: skip-gram 2(L − 1) examples a sentence of L
    words, CBOW one per word that has a neighbour."""
    sentences = [[0, 1, 2], [3, 4], [5]]
    assert _train(sentences, 1, cbow=False)[1] == 4 + 2
    assert _train(sentences, 1, cbow=True)[1] == 3 + 2


def test_the_dynamic_window_sees_far_words_less_often():
    """Window 2 drawn as 1 or 2 at each position: 3 context words a position on average (2 or 4)."""
    sentence = list(np.arange(20_000) % 50)
    _, examples = _train([sentence], 2, cbow=False)
    assert examples / 20_000 == pytest.approx(3.0, abs=0.03)


def test_subsampling_keeps_each_word_at_its_rate():
    kept = np.empty(100_000, dtype=np.int64)
    state = np.full(1, np.uint64(12345), dtype=np.uint64)
    n = kernel._subsample(np.array([0, 1] * 50_000), 0, 100_000, np.array([0.2, 1.0]), state, kept)
    counts = np.bincount(kept[:n], minlength=2)
    assert counts[1] == 50_000 and counts[0] / 50_000 == pytest.approx(0.2, abs=0.01)


def test_negative_words_follow_the_unigram_table_and_skip_the_positive_word():
    counts = np.array([50.0, 30.0, 15.0, 5.0])
    sampler = UnigramSampler(counts)
    keep, alias = alias_table(sampler.probabilities)
    state = np.full(1, np.uint64(7), dtype=np.uint64)
    words = np.empty(6, dtype=np.int64)
    drawn = []
    for _ in range(20_000):
        n = kernel._draw_words(0, 5, keep, alias, state, words)
        assert words[0] == 0
        drawn.extend(words[1:n].tolist())
    share = np.bincount(drawn, minlength=4) / len(drawn)
    assert share[0] == 0  # the positive word is never its own negative
    expected = sampler.probabilities[1:] / sampler.probabilities[1:].sum()
    assert np.allclose(share[1:], expected, atol=0.01)
    assert len(drawn) / 20_000 == pytest.approx(5 * (1 - sampler.probabilities[0]), rel=0.02)


def test_a_jobs_seed_decides_its_updates():
    sentences = [list(np.random.default_rng(s).integers(0, 30, size=12)) for s in range(40)]
    assert _train(sentences, 3, cbow=False, seed=5) == _train(sentences, 3, cbow=False, seed=5)
    assert _train(sentences, 3, cbow=False, seed=5) != _train(sentences, 3, cbow=False, seed=6)


def _skipgram_by_hand(sentences, order, tables, window=2, negative=2, seed=9):
    """Skip-gram on ``sentences`` (no subsampling, one rate) visiting their positions in ``order``, a list of
    (sentence, position), with the kernel's own pieces called one by one: the window drawn, then each context word
    predicted by the centre's row with its negatives drawn."""
    w_in, w_out = tables
    keep, alias = alias_table(np.full(len(w_in), 1 / len(w_in)))
    state = np.full(1, np.uint64(seed) | np.uint64(1), dtype=np.uint64)
    dh, words, none = np.empty(w_in.shape[1], np.float32), np.empty(negative + 1, np.int64), w_in[:0]
    for s, i in order:
        sentence = np.asarray(sentences[s], dtype=np.int64)
        reach = 1 + int(kernel._uniform(state) * window)
        for j in [j for j in range(max(0, i - reach), min(len(sentence), i + reach + 1)) if j != i]:
            n_words = kernel._draw_words(sentence[j], negative, keep, alias, state, words)
            kernel.update(w_in, w_out, none, none, w_in[sentence[i]], dh, sentence[i:i + 1], 1, words, n_words, 0.025)


def test_sentences_side_by_side_take_their_positions_in_turn():
    """``interleave`` 2: the first position of each of two sentences, then the second of each, and the longer one's
    last positions alone, then the next two; 1: sentence by sentence. Each matches the same order written out by
    hand, and the two orders train different tables."""
    sentences = [[0, 1, 2, 3], [4, 5], [6, 7, 8], [9, 1, 4, 2, 5]]
    rng = np.random.default_rng(5)
    start = [(0.1 * rng.standard_normal((10, 4))).astype(np.float32) for _ in range(2)]
    turns = [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (0, 3), (2, 0), (3, 0), (2, 1), (3, 1), (2, 2), (3, 2), (3, 3),
             (3, 4)]
    one_by_one = [(s, i) for s, sentence in enumerate(sentences) for i in range(len(sentence))]
    trained = {}
    for interleave, order in ((2, turns), (1, one_by_one)):
        tables, by_hand = [t.copy() for t in start], [t.copy() for t in start]
        examples = _train(sentences, 2, cbow=False, seed=9, tables=tables, interleave=interleave,
                          alpha_end=0.025)[1]
        _skipgram_by_hand(sentences, order, by_hand)
        assert examples > len(one_by_one)
        assert all(np.allclose(a, b, rtol=0, atol=1e-6) for a, b in zip(tables, by_hand))
        trained[interleave] = tables
    assert not np.allclose(trained[1][0], trained[2][0], rtol=0, atol=1e-4)


@pytest.mark.parametrize("cbow", [True, False])
def test_a_copy_of_the_first_rows_stands_for_them(cbow):
    """The tables' first rows in copies (as a worker among several has them) train exactly as the tables' own rows:
    the same loss, and the same tables (to the merge's rounding) once the copies are merged back."""
    sentences = [list(np.random.default_rng(s).integers(0, 30, size=12)) for s in range(40)]
    rng = np.random.default_rng(2)
    tables = [(0.1 * rng.standard_normal((30, 4))).astype(np.float32) for _ in range(2)]
    shared, copied = [t.copy() for t in tables], [t.copy() for t in tables]
    assert _train(sentences, 3, cbow, tables=shared) == _train(sentences, 3, cbow, own_rows=8, tables=copied)
    assert all(np.allclose(a, b, rtol=0, atol=1e-6) for a, b in zip(shared, copied))  # the merge adds a difference
    assert not any(np.array_equal(a[:8], b[:8]) for a, b in zip(shared, tables))  # the copied rows did move


def test_a_copy_is_merged_every_so_many_words_from_job_to_job():
    """``clock``'s count for every copied row (words since they merged, words between merges): copies of both
    tables' first 8 rows merged before every sentence that finds 50 words trained on since the last merge (12-word
    sentences: every 5th), the count carried over to the next job; one worker alone trains the same tables (to
    rounding) as on the tables themselves."""
    sentences = [list(np.random.default_rng(s).integers(0, 30, size=12)) for s in range(40)]
    rng = np.random.default_rng(3)
    tables = [(0.1 * rng.standard_normal((30, 4))).astype(np.float32) for _ in range(2)]
    shared, copied = [t.copy() for t in tables], [t.copy() for t in tables]
    w_in, w_out = copied
    ids = np.concatenate(sentences).astype(np.int64)
    bounds = np.arange(0, 481, 12)
    keep, alias = alias_table(np.full(30, 1 / 30))
    copies, clock = (np.stack([w_in[:8]] * 2), np.stack([w_out[:8]] * 2)), np.array([0, 0, 0, 50, 0])
    for job in (np.arange(0, 22), np.arange(22, 40)):
        kernel.train_job(w_in, w_out, copies[0], copies[1], clock, ids, bounds, job, np.ones(30), keep, alias, False,
                         3, 2, 1, 0.025, 0.0001, np.uint64(job[0] + 1))
    assert clock[2] == clock[0] == 480 - 7 * 60  # merged before sentences 6, 11, ..., 36: the last 5 not yet
    for copy, table, before in zip(copies, (w_in, w_out), tables):  # merged mid-run
        assert np.array_equal(copy[1], table[:8]) and not np.array_equal(table[:8], before[:8])
        kernel.merge(table, copy, 8)
    none = np.empty((2, 0, 4), np.float32)
    for job in (np.arange(0, 22), np.arange(22, 40)):
        kernel.train_job(shared[0], shared[1], none, none, np.array([0, 0, 0, 50, 0]), ids, bounds, job, np.ones(30), keep,
                         alias, False, 3, 2, 1, 0.025, 0.0001, np.uint64(job[0] + 1))
    assert all(np.allclose(a, b, atol=1e-6) for a, b in zip(shared, copied))


_FIRST_RUN = """
import json, os, sys
os.environ["NUMBA_CACHE_DIR"] = sys.argv[1]  # empty: a first run on a machine
import numpy as np
from seqlab.vectors import kernel
from seqlab.vectors.config import VectorsTrainConfig
from seqlab.vectors.train import train_word2vec
with kernel.compiling_ahead(True):
    pass
sentences = [np.array([0, 1, 2, 3, 1, 0]), np.array([2, 3, 1])]
for workers in (1, 2):
    train_word2vec(sentences, np.array([3, 3, 2, 2]), VectorsTrainConfig(method="cbow", dim=4, epochs=1, workers=workers,
                                                                          min_count=1), progress=False)
stats = [kernel.train_job.stats, kernel.merge.stats]
print(json.dumps({"hits": sum(len(s.cache_hits) for s in stats), "misses": sum(len(s.cache_misses) for s in stats)}))
"""


def test_the_kernel_compiled_ahead_is_the_one_a_run_calls(tmp_path):
    """``compiling_ahead``'s helper compiles ``train_job`` and ``merge`` for exactly the types training calls them
    with: a first run (empty numba cache) then loads both from the cache and compiles nothing itself."""
    out = subprocess.run([sys.executable, "-c", _FIRST_RUN, str(tmp_path / "numba")], capture_output=True, text=True,
                         check=True, timeout=300)
    assert json.loads(out.stdout.splitlines()[-1]) == {"hits": 2, "misses": 0}


def test_a_failing_helper_is_waited_for_and_an_interrupted_block_stops_it(monkeypatch):
    """A helper that fails is waited for without an error (the run then compiles the kernel itself); a block that
    raises (an interrupted run) stops a helper still compiling instead of leaving it behind."""
    started = []

    class Recorded(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(kernel.subprocess, "Popen", Recorded)
    monkeypatch.setattr(kernel, "_HELPER", "raise SystemExit(3)")
    with kernel.compiling_ahead(True):
        pass
    assert started[-1].returncode == 3
    monkeypatch.setattr(kernel, "_HELPER", "import time; time.sleep(60)")
    with pytest.raises(KeyboardInterrupt), kernel.compiling_ahead(True):
        raise KeyboardInterrupt
    assert started[-1].returncode is not None and started[-1].returncode < 0  # killed, not finished
    with kernel.compiling_ahead(False):
        pass
    assert len(started) == 2  # nothing started without ``start``

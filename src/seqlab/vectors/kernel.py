"""word2vec's training kernel: negative-sampling SGD one example at a time, compiled with numba, the corpus cut
into jobs that several threads train at once on the same tables (word2vec.c's and gensim's way, Mikolov et al.
2013; the threads' updates are not locked, "Hogwild!", Niu et al. 2011).

A job is a run of sentences, taken ``interleave`` at a time side by side (the first kept position of each, then the
second of each, ...; ``train.INTERLEAVE``: skip-gram's bursts of updates on the same rows broken up). For each
sentence the kernel

1. subsamples: keeps each occurrence of word w with probability ``keep[w]`` (``pairs.keep_probabilities``);
2. draws a window ``b`` from 1..``window`` at each kept position ``i`` (the dynamic window);
3. trains on the words within ``b`` of ``i`` in the kept sentence, with ``h`` the centre word's row of
   ``W_in`` (skip-gram, once per context word, which is the positive word) or the mean of the context rows
   (CBOW, once, the centre word positive), and ``negative`` words drawn from the unigram^0.75 table
   (``alias_table``), a draw equal to the positive word skipped (as word2vec.c and gensim do).

One update (seed 002 §4.2's ``EmbeddingDot`` + ``SigmoidWithLoss`` backward, SGD at rate α): for each scored
word ``w`` with label ``t`` (1 positive, 0 negative) and score ``s = h · W_out[w]``,
``g = α (t − σ(s))``, ``dh += g W_out[w]`` (the row before its update), ``W_out[w] += g h``; then ``dh`` is added
whole to the centre's row (skip-gram) or to every context row (CBOW, word2vec.c's ``cbow_mean=1`` update). The
loss ``−log σ(s)`` (positive) and ``−log σ(−s)`` (negative) is summed for the log.

The rate falls linearly over the whole run; inside a job, from ``alpha_start`` to ``alpha_end`` by the job's
words done. Everything random in a job comes from its own ``seed`` (xorshift64*), so one thread gives the same
tables every time; several threads interleave their updates as the machine schedules them. A job may be given
``copy_in`` and ``copy_out``, copies of W_in's and W_out's first rows that it reads and updates instead of the
tables' and adds back to them every so many words (``merge``; each of several workers keeps its own:
``train._OwnRows``).

Loops are written out element by element: numba compiles them as fast as the array expressions they replace, in
about half the time. ``update`` is inlined into ``train_job`` (``inline="always"``): called, its eleven arguments
(each array a struct of many words) cost skip-gram, which calls it once per context word, 0.92× the words/s once
the copies of W_in were added; inlined, skip-gram is level with the code before them and CBOW 1.33× faster with one
worker (Multi30k 9 times over, old and new code in processes taking turns on a Zen 4). A first run on a machine
compiles the kernel (4.9 s on a 2-core AMD EPYC) into numba's cache, later runs load it from there;
``compiling_ahead`` compiles it in a process of its own while a run builds its vocabulary.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
from numba import njit

_MIX = np.uint64(0x2545F4914F6CDD1D)  # xorshift64*'s multiplier (Vigna 2016)
_UNIT = 1.0 / 9007199254740992.0  # 2^-53: the top 53 bits of a draw as a float in [0, 1)
_CLAMP = np.float32(20.0)  # |s| beyond which σ(s) is 0 or 1 in float32: the score is clamped for the exp
_ONE, _ZERO = np.float32(1.0), np.float32(0.0)


@njit(nogil=True, fastmath=True, cache=True, error_model="numpy")
def _uniform(state: np.ndarray) -> float:
    """The next number in [0, 1) of the xorshift64* generator whose state is ``state[0]`` (never 0)."""
    x = state[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    state[0] = x
    return float((x * _MIX) >> np.uint64(11)) * _UNIT


@njit(nogil=True, fastmath=True, cache=True, error_model="numpy")
def _negative_word(keep: np.ndarray, alias: np.ndarray, state: np.ndarray) -> int:
    """A word from the alias table (``word2vec.UnigramSampler``'s draw): a column and a point in it."""
    point = _uniform(state) * keep.shape[0]
    column = int(point)
    return column if point - column < keep[column] else int(alias[column])


@njit(nogil=True, fastmath=True, cache=True, error_model="numpy", inline="always")
def update(w_in: np.ndarray, w_out: np.ndarray, own_in: np.ndarray, own_out: np.ndarray, h: np.ndarray,
           dh: np.ndarray, inputs: np.ndarray, n_inputs: int, words: np.ndarray, n_words: int, alpha: float) -> float:
    """One example: ``h`` (dim,) the input (skip-gram: the centre's row itself, read before this adds to it; CBOW:
    the mean of ``inputs[:n_inputs]``'s rows), scored against ``words[:n_words]`` (the positive word first, then
    the negatives). Moves W_out's scored rows and the input rows of ``inputs[:n_inputs]`` by SGD at ``alpha``;
    returns the example's loss. ``own_in`` and ``own_out`` (rows, dim) stand for W_in's and W_out's first rows (a
    worker's copies of them; no rows: none); ``dh`` is work space."""
    dim = h.shape[0]
    for d in range(dim):
        dh[d] = 0.0
    product, linear = 1.0, 0.0  # the loss Σ log(1 + e) + Σ max(∓s, 0), its logs taken once, of the product
    for k in range(n_words):
        w = words[k]
        table = own_out if w < own_out.shape[0] else w_out
        s = np.float32(0.0)
        for d in range(dim):
            s += h[d] * table[w, d]
        s = min(max(s, -_CLAMP), _CLAMP)
        e = np.exp(-abs(s))  # σ and the loss from one exp (float32): σ(s) = 1 / (1 + e) for s ≥ 0, e / (1 + e) below
        sigma = _ONE / (_ONE + e) if s >= 0 else e / (_ONE + e)
        product *= _ONE + e  # at most 2 a word
        linear += max(-s, 0) if k == 0 else max(s, 0)  # −log σ(s) = log(1 + e) + max(−s, 0); −log σ(−s) likewise
        g = np.float32(alpha) * ((_ONE if k == 0 else _ZERO) - sigma)  # float32, as the rows
        for d in range(dim):
            dh[d] += g * table[w, d]
            table[w, d] += g * h[d]
    for j in range(n_inputs):
        row = inputs[j]
        table = own_in if row < own_in.shape[0] else w_in
        for d in range(dim):
            table[row, d] += dh[d]
    return np.log(product) + linear


@njit(nogil=True, fastmath=True, cache=True, error_model="numpy")
def _draw_words(positive: int, negative: int, keep: np.ndarray, alias: np.ndarray, state: np.ndarray,
                words: np.ndarray) -> int:
    """``words`` := the positive word and up to ``negative`` draws that are not it; returns how many."""
    words[0] = positive
    n = 1
    for _ in range(negative):
        w = _negative_word(keep, alias, state)
        if w != positive:
            words[n] = w
            n += 1
    return n


@njit(nogil=True, fastmath=True, cache=True, error_model="numpy")
def _subsample(ids: np.ndarray, start: int, stop: int, keep_word: np.ndarray, state: np.ndarray,
               kept: np.ndarray) -> int:
    """``kept`` := the words of ids[start:stop] that subsampling keeps; returns how many."""
    n = 0
    for p in range(start, stop):
        w = ids[p]
        if keep_word[w] >= 1.0 or _uniform(state) < keep_word[w]:
            kept[n] = w
            n += 1
    return n


@njit(nogil=True, fastmath=True, cache=True, error_model="numpy")
def merge(table: np.ndarray, copy: np.ndarray, rows: int, changed: bool = False) -> None:
    """``table``'s first ``rows`` rows += what ``copy[0]`` (copied rows, dim) changed in them since ``copy[1]`` was
    read from them; then both hold the table's rows as they are now. With ``changed``, only the rows this copy
    changed (an update moves every element of a row, so its first tells): the others are neither written to the
    table nor read afresh from it (a change that left the first element as it was waits, like them, for a merge of
    every row: nothing is lost). Not locked: a worker merging while another does may, rarely, lose one element's
    addition (Hogwild!'s own risk for every update)."""
    for r in range(min(rows, copy.shape[1])):
        if changed and copy[0, r, 0] == copy[1, r, 0]:
            continue
        for d in range(copy.shape[2]):
            now = table[r, d] + (copy[0, r, d] - copy[1, r, d])
            table[r, d] = now
            copy[0, r, d] = now
            copy[1, r, d] = now


@njit(nogil=True, fastmath=True, cache=True, error_model="numpy")
def _merge_due(w_in: np.ndarray, w_out: np.ndarray, copy_in: np.ndarray, copy_out: np.ndarray,
               clock: np.ndarray) -> None:
    """Every copied row merged where its count (``train_job``'s ``clock``) is reached, else those of the hottest
    rows that the worker changed where theirs is."""
    rows, hot = max(copy_in.shape[1], copy_out.shape[1]), False
    if clock[2] >= clock[3]:
        clock[0], clock[2] = 0, 0
    elif clock[4] > 0 and clock[0] >= clock[1]:
        rows, clock[0], hot = clock[4], 0, True
    else:
        return
    merge(w_in, copy_in, rows, hot)
    merge(w_out, copy_out, rows, hot)


@njit(nogil=True, fastmath=True, cache=True, error_model="numpy")
def _subsample_side(ids: np.ndarray, bounds: np.ndarray, side: np.ndarray, keep_word: np.ndarray, state: np.ndarray,
                    kept: np.ndarray, n_kept: np.ndarray) -> tuple[int, int]:
    """``kept[g, :n_kept[g]]`` := what subsampling keeps of sentence ``side[g]``, for each; returns the most kept of
    one sentence and the sentences' words."""
    most, words = 0, 0
    for g in range(len(side)):
        s = side[g]
        n_kept[g] = _subsample(ids, bounds[s], bounds[s + 1], keep_word, state, kept[g])
        most, words = max(most, n_kept[g]), words + bounds[s + 1] - bounds[s]
    return most, words


@njit(nogil=True, fastmath=True, cache=True, error_model="numpy")
def train_job(w_in: np.ndarray, w_out: np.ndarray, copy_in: np.ndarray, copy_out: np.ndarray, clock: np.ndarray,
              ids: np.ndarray, bounds: np.ndarray, sentences: np.ndarray, keep_word: np.ndarray, keep: np.ndarray,
              alias: np.ndarray, cbow: bool, window: int, negative: int, interleave: int, alpha_start: float,
              alpha_end: float, seed: np.uint64) -> tuple[float, int]:
    """Train on ``sentences`` (indices into ``bounds``: sentence s is ids[bounds[s]:bounds[s + 1]]), ``interleave``
    of them at a time side by side (the first kept position of each, then the second of each, ...; 1: sentence by
    sentence), ``copy_in[0]`` and ``copy_out[0]`` (rows, dim) standing for W_in's and W_out's first rows
    (``update``), ``copy_in[1]`` and ``copy_out[1]`` those rows as last read (``merge``). ``clock`` is (words
    trained on since the hottest rows merged, words between their merges, words since every copied row merged,
    words between those merges, how many rows are the hottest): the copies are merged before the first sentences
    that find a count reached (it goes on from job to job), the hottest rows only where the worker changed them.
    Returns the summed loss and the number of examples."""
    state = np.full(1, np.uint64(seed) | np.uint64(1), dtype=np.uint64)
    dim = w_in.shape[1]
    h, dh = np.empty(dim, dtype=w_in.dtype), np.empty(dim, dtype=w_in.dtype)
    longest, total = 0, 0
    for s in sentences:
        longest, total = max(longest, bounds[s + 1] - bounds[s]), total + bounds[s + 1] - bounds[s]
    kept, n_kept = np.empty((interleave, longest), dtype=np.int64), np.zeros(interleave, dtype=np.int64)
    context, words = np.empty(2 * window, dtype=np.int64), np.empty(negative + 1, dtype=np.int64)
    own_in, own_out = copy_in[0], copy_out[0]  # (rows, dim) each
    loss, examples, done = 0.0, 0, 0
    for first in range(0, len(sentences), interleave):
        alpha = alpha_start + (alpha_end - alpha_start) * done / max(total, 1)
        if own_in.shape[0] + own_out.shape[0] > 0:
            _merge_due(w_in, w_out, copy_in, copy_out, clock)
        side = sentences[first:first + interleave]
        most, side_words = _subsample_side(ids, bounds, side, keep_word, state, kept, n_kept)
        done = done + side_words
        clock[0], clock[2] = clock[0] + side_words, clock[2] + side_words
        for i in range(most):
            for g in range(len(side)):
                n, sentence = n_kept[g], kept[g]
                if i >= n:
                    continue
                reach = 1 + int(_uniform(state) * window)
                width = 0
                for j in range(max(0, i - reach), min(n, i + reach + 1)):
                    if j != i:
                        context[width] = sentence[j]
                        width += 1
                if width == 0:
                    continue
                if cbow:
                    for d in range(dim):
                        h[d] = 0.0
                    for j in range(width):
                        word = context[j]
                        table = own_in if word < own_in.shape[0] else w_in
                        for d in range(dim):
                            h[d] += table[word, d]
                    for d in range(dim):
                        h[d] /= width
                    n_words = _draw_words(sentence[i], negative, keep, alias, state, words)
                    loss += update(w_in, w_out, own_in, own_out, h, dh, context, width, words, n_words, alpha)
                    examples += 1
                    continue
                centre = sentence[i:i + 1]  # skip-gram: the centre's row itself (``update`` adds to it at its end)
                row = (own_in if sentence[i] < own_in.shape[0] else w_in)[sentence[i]]
                for j in range(width):  # the centre's row predicts each context word in turn
                    n_words = _draw_words(context[j], negative, keep, alias, state, words)
                    loss += update(w_in, w_out, own_in, own_out, row, dh, centre, 1, words, n_words, alpha)
                    examples += 1
    return loss, examples


AHEAD_WORDS = 1_000_000  # a corpus this long takes about as long to count and encode (~0.5 s) as the helper of
# ``compiling_ahead`` takes to start and load a cached kernel: from here on it costs nothing and can save the compile
_HELPER = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location(sys.argv[2], sys.argv[1]); "
           "module = sys.modules[sys.argv[2]] = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); "
           "module.warm()")  # under this module's name: what numba compiles refers to it by name
_HELPER_WAIT_S = 300.0  # a helper that has not finished by then is stopped: the run compiles the kernel itself


@contextlib.contextmanager
def compiling_ahead(start: bool) -> Iterator[None]:
    """With ``start``, the kernel is compiled into numba's cache, in a process of its own, while the ``with`` block
    runs (a run builds its vocabulary there): on a 2-core machine the compile takes the other core instead of ~5 s of
    the first epoch (numba compiles holding the GIL, so a thread would not run beside the block). The block's end
    waits for the helper. The helper imports this file alone (numpy and numba, not seqlab); numba names the cache by
    the file, so the run finds what the helper compiled. Where the helper fails, the run compiles as it would have."""
    helper = (subprocess.Popen([sys.executable, "-c", _HELPER, __file__, __name__], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) if start else None)
    try:
        yield
        if helper is not None:
            helper.wait(timeout=_HELPER_WAIT_S)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if helper is not None and helper.poll() is None:
            helper.kill()
            helper.wait()


def warm() -> None:
    """Compile ``train_job`` and ``merge`` for the types ``train._Kernel`` calls them with, on tiny tables."""
    words, dim = 4, 2
    w_in, w_out = np.zeros((words, dim), np.float32), np.zeros((words, dim), np.float32)
    copy, clock = np.zeros((2, 1, dim), np.float32), np.array([0, 1, 0, 2, 1], dtype=np.int64)
    ids, bounds = np.arange(words, dtype=np.int64), np.array([0, words], dtype=np.int64)
    keep, alias = np.ones(words), np.arange(words, dtype=np.int64)
    train_job(w_in, w_out, copy, copy.copy(), clock, ids, bounds, np.zeros(1, dtype=np.int64), np.ones(words), keep,
              alias, True, 2, 1, 1, 0.025, 0.0001, np.uint64(1))
    merge(w_out, copy, 1)

"""What every decoding strategy returns: hypotheses with their scores, and the log-probabilities they are
ranked by (``<pad>`` and ``<sos>`` never chosen). The strategies call the models through ``step.py``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from numba import njit

from seqlab.model.cache import exp_nonpositive
from seqlab.specials import PAD, SOS


@dataclass
class Hypothesis:
    """One output sentence."""

    tokens: list[int]  # without <sos>/<eos>
    log_prob: float  # the model's log-probability of tokens (+ <eos> when it ended there)
    score: float  # what the strategy ranked by: log_prob, or log_prob / length penalty in beam search
    attention: torch.Tensor | None = None  # (steps, layers, heads, src_len): one row per output word (+ <eos>)
    token_log_probs: list[float] | None = None  # per output word (+ <eos>): its log-probability; None: not given


def best_words(logits: torch.Tensor) -> torch.Tensor:
    """(rows, vocab) logits -> (rows,) the most probable word of each row, never <pad> or <sos>: the argmax of
    ``log_probs`` without forming them (a row whose argmax is one of those two takes the long way)."""
    ids = _argmax(logits)
    special = (ids == PAD) | (ids == SOS)
    if special.any():
        ids[special] = log_probs(logits[special]).argmax(dim=-1)
    return ids


def top_words(logits: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, vocab) logits -> the log-probabilities (rows, n) of each row's n most probable words, best first, and
    the words (rows, n): ``log_probs(logits).topk(n)``; on the CPU in one compiled pass per row
    (``_top_log_probs``), without forming the (rows, vocab) log-probabilities."""
    n = min(n, logits.size(-1))
    if not _kernel_reads(logits):
        return log_probs(logits).topk(n, dim=-1)
    logits = logits.float().contiguous()
    top = torch.empty(logits.size(0), n)  # (rows, n)
    words = torch.empty(logits.size(0), n, dtype=torch.long)
    _top_log_probs(logits.numpy(), PAD, SOS, top.numpy(), words.numpy())
    return top, words


def chosen_log_probs(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """(rows, vocab) logits and the words chosen (rows,) -> their log-probabilities (rows,), as ``log_probs``
    gives them: log softmax(logits)_id = logit_id - log Σ exp(logits)."""
    logits = logits.float()
    return logits.gather(1, ids[:, None]).squeeze(1) - log_normalisers(logits)


def log_normalisers(logits: torch.Tensor) -> torch.Tensor:
    """(rows, vocab) -> (rows,) log Σ_v exp(logits_v): ``logits.logsumexp(-1)``, on the CPU in one compiled pass
    per row (``_log_normalisers``; torch's forms the shifted logits and their exponentials in memory)."""
    if not _kernel_reads(logits):
        return logits.float().logsumexp(dim=-1)
    logits = logits.float().contiguous()
    out = torch.empty(logits.size(0))
    _log_normalisers(logits.numpy(), out.numpy())
    return out


def _kernel_reads(logits: torch.Tensor) -> bool:
    """Whether the compiled passes take these logits: on the CPU, outside autograd, over a vocabulary large
    enough (``CHUNKED_FROM``) that a pass over it costs more than the call."""
    return logits.device.type == "cpu" and not logits.requires_grad and logits.size(-1) >= CHUNKED_FROM


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """(rows, vocab) logits -> log-probabilities in float32, with <pad> and <sos> never chosen (-inf)."""
    out = torch.log_softmax(logits.float(), dim=-1)
    out[:, PAD] = -torch.inf
    out[:, SOS] = -torch.inf
    return out


# --- the passes over the vocabulary at every step -----------------------------------------------------------
# torch's CPU argmax and topk go through each row element by element: over (1280, 8000) log-probabilities (beam 5
# on 256 Multi30k sentences) a topk(10) takes 18 ms and an argmax 13 ms, where amax takes 1.7 ms (2-core Xeon with
# AVX-512). Over a large vocabulary the argmax takes the words in chunks of CHUNK: the chunk of the largest maximum
# (one vectorised pass), then the word within it. The top n words and the log-normaliser are compiled passes (below):
# torch's log_softmax and logsumexp write the shifted logits and their exponentials to memory and read them back; on
# the Multi30k test split its logsumexp was a tenth of greedy decoding's time with one thread.

CHUNK = 64  # words per chunk
CHUNKED_FROM = 16 * CHUNK  # vocabularies smaller than this take torch's own passes (the date model's 15 words)


def _chunks(logits: torch.Tensor) -> torch.Tensor | None:
    """(rows, vocab) -> (rows, chunks, CHUNK), a view where the vocabulary is a multiple of CHUNK, else padded
    with -inf; None for a small vocabulary."""
    rows, vocab = logits.shape
    if vocab < CHUNKED_FROM:
        return None
    if vocab % CHUNK:
        logits = F.pad(logits, (0, CHUNK - vocab % CHUNK), value=-torch.inf)
    return logits.view(rows, -1, CHUNK)


def _argmax(logits: torch.Tensor) -> torch.Tensor:
    """logits.argmax(dim=-1), the first of equal maxima as torch's: the first chunk holding the row's maximum,
    then the first maximum within it."""
    chunks = _chunks(logits)
    if chunks is None:
        return logits.argmax(dim=-1)
    best = chunks.amax(dim=-1).argmax(dim=-1)  # (rows,)
    within = chunks[torch.arange(chunks.size(0), device=chunks.device), best].argmax(dim=-1)
    return best * CHUNK + within


# The compiled passes: float32 rows of logits, each read from memory once and worked on in vector registers.
# Their floating-point flags allow reordering sums and maxima (vectorised), never assume that no value is infinite
# (a constraint sets logits to -inf).
FLAGS = {"reassoc", "nsz", "contract", "arcp"}
LANES = 16  # values compared at once: two AVX2 vectors, one AVX-512 vector


@njit(inline="always", fastmath=FLAGS)
def _block_max(x: np.ndarray, start: int) -> float:  # pragma: no cover (compiled)
    """The largest of the block x[start : start + LANES] (fewer at the end of x): a whole block unrolled."""
    top = x[start]
    if start + LANES <= x.size:
        for j in range(1, LANES):
            top = max(top, x[start + j])
    else:
        for i in range(start + 1, x.size):
            top = max(top, x[i])
    return top


@njit(inline="always", fastmath=FLAGS)
def _log_normaliser(x: np.ndarray, top: float, shifted: np.ndarray, weights: np.ndarray,
                    bits: np.ndarray) -> float:  # pragma: no cover (compiled)
    """log Σ exp(x) = m + log Σ exp(x - m), m = ``top`` = max x (seed 000's stable softmax); -inf where every x
    is -inf. shifted, weights (float32), bits (int32): scratch as long as x."""
    if top == -np.inf:
        return top
    for i in range(x.size):
        shifted[i] = max(x[i] - top, np.float32(-87.0))  # exp_nonpositive's domain: -inf -> e^-87, far below notice
    exp_nonpositive(shifted, weights, bits)
    total = np.float32(0.0)
    for i in range(x.size):
        total += weights[i]
    return top + np.log(total)


@njit(nogil=True, fastmath=FLAGS, cache=True, error_model="numpy")
def _log_normalisers(logits: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover (compiled; tested through
    """out[r] = log Σ exp(logits[r]) (rows, vocab) -> (rows,)."""  # log_normalisers)
    vocab = logits.shape[1]
    shifted, weights = np.empty(vocab, dtype=np.float32), np.empty(vocab, dtype=np.float32)
    bits = np.empty(vocab, dtype=np.int32)
    for r in range(logits.shape[0]):
        x = logits[r]
        top = np.float32(-np.inf)
        for start in range(0, vocab, LANES):
            top = max(top, _block_max(x, start))
        out[r] = _log_normaliser(x, top, shifted, weights, bits)


@njit(inline="always", fastmath=FLAGS)
def _keep(x: np.ndarray, i: int, kept: int, best: np.ndarray, ids: np.ndarray) -> int:  # pragma: no cover
    """Word i into the n best kept so far (best, ids: best first), after those as good: how many are kept."""
    n = best.size
    at = min(kept, n - 1)
    while at > 0 and x[i] > best[at - 1]:
        best[at], ids[at] = best[at - 1], ids[at - 1]
        at -= 1
    best[at], ids[at] = x[i], i
    return min(kept + 1, n)


@njit(nogil=True, fastmath=FLAGS, cache=True, error_model="numpy")
def _top_log_probs(logits: np.ndarray, pad: int, sos: int, top: np.ndarray,
                   words: np.ndarray) -> None:  # pragma: no cover (compiled; tested through top_words)
    """Each row's n best words but ``pad`` and ``sos``, best first (top, words: (rows, n)), with their
    log-probabilities logit - log Σ exp(logits). One pass over the row finds its maximum block by block (``LANES``
    logits) and keeps the best words as it goes, a word better than the n-th kept inserted where it belongs; a
    block whose maximum is no better is passed over. Where fewer than n words may be chosen, ``pad`` and ``sos``
    follow them at -inf."""
    rows, vocab = logits.shape
    n = top.shape[1]
    shifted, weights = np.empty(vocab, dtype=np.float32), np.empty(vocab, dtype=np.float32)
    bits = np.empty(vocab, dtype=np.int32)
    best, ids = np.empty(n, dtype=np.float32), np.empty(n, dtype=np.int64)  # the words kept, best first
    for r in range(rows):
        x = logits[r]
        kept, largest = 0, np.float32(-np.inf)
        for start in range(0, vocab, LANES):
            block = _block_max(x, start)
            largest = max(largest, block)
            if kept == n and not block > best[n - 1]:
                continue
            for i in range(start, min(start + LANES, vocab)):
                if i != pad and i != sos and (kept < n or x[i] > best[n - 1]):
                    kept = _keep(x, i, kept, best, ids)
        for j, barred in enumerate((pad, sos)):
            if kept + j < n:
                best[kept + j], ids[kept + j] = -np.inf, barred
        normaliser = _log_normaliser(x, largest, shifted, weights, bits)
        for j in range(n):
            top[r, j], words[r, j] = best[j] - normaliser, ids[j]

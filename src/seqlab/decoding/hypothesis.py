"""What every decoding strategy returns: hypotheses with their scores, and the log-probabilities they are
ranked by (``<pad>`` and ``<sos>`` never chosen). The strategies call the models through ``step.py``."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

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
    the words (rows, n): ``log_probs(logits).topk(n)``."""
    return _topk(log_probs(logits), min(n, logits.size(-1)))


def chosen_log_probs(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """(rows, vocab) logits and the words chosen (rows,) -> their log-probabilities (rows,), as ``log_probs``
    gives them: log softmax(logits)_id = logit_id - log Σ exp(logits)."""
    logits = logits.float()
    return logits.gather(1, ids[:, None]).squeeze(1) - logits.logsumexp(dim=-1)


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """(rows, vocab) logits -> log-probabilities in float32, with <pad> and <sos> never chosen (-inf)."""
    out = torch.log_softmax(logits.float(), dim=-1)
    out[:, PAD] = -torch.inf
    out[:, SOS] = -torch.inf
    return out


# --- the passes over the vocabulary at every step -----------------------------------------------------------
# torch's CPU argmax and topk go through each row element by element: over (1280, 8000) log-probabilities (beam 5
# on 256 Multi30k sentences) a topk(10) takes 18 ms and an argmax 13 ms, where amax takes 1.7 ms (2-core Xeon with
# AVX-512). Over a large vocabulary they take the words in chunks of CHUNK: the best chunks by their maxima (one
# vectorised pass), then the words within them.

CHUNK = 64  # words per chunk
CHUNKED_FROM = 16 * CHUNK  # vocabularies smaller than this take torch's own passes


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


def _topk(logits: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """logits.topk(n, dim=-1): the n best words of a row lie in the n chunks of the largest maxima (a chunk left
    out has n chunks' maxima at least as large as all its words)."""
    chunks = _chunks(logits)
    if chunks is None or chunks.size(1) < n:
        return logits.topk(n, dim=-1)
    rows = torch.arange(chunks.size(0), device=chunks.device)[:, None]
    best = chunks.amax(dim=-1).topk(n, dim=-1).indices  # (rows, n) chunks
    top, index = chunks[rows, best].flatten(1).topk(n, dim=-1)  # among their (rows, n · CHUNK) words
    return top, best.gather(1, index // CHUNK) * CHUNK + index % CHUNK


"""What every decoding strategy returns: hypotheses with their scores, and the log-probabilities they are
ranked by (``<pad>`` and ``<sos>`` never chosen). The strategies call the models through ``step.py``."""

from __future__ import annotations

from dataclasses import dataclass

import torch

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
    ids = logits.argmax(dim=-1)
    special = (ids == PAD) | (ids == SOS)
    if special.any():
        ids[special] = log_probs(logits[special]).argmax(dim=-1)
    return ids


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

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


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """(rows, vocab) logits -> log-probabilities in float32, with <pad> and <sos> never chosen (-inf)."""
    out = torch.log_softmax(logits.float(), dim=-1)
    out[:, PAD] = -torch.inf
    out[:, SOS] = -torch.inf
    return out

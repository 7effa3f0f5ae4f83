"""What every decoding strategy returns, and the step contract it relies on.

A model decodes step by step through three calls (``Transformer`` and ``RNNSeq2seq`` both have them):

* ``state = model.start(src)``: encode the sources (batch, src_len); nothing decoded yet;
* ``logits, state, weights = model.step(ids, state, need_weights)``: feed the previous output words
  ids (batch,), get the next word's logits (batch, vocab) and, if asked, the cross-attention weights
  (batch, layers, heads, src_len);
* ``state.select(rows, same_sources)``: keep, repeat or reorder sentences (beam search); with
  ``same_sources`` the rows only reorder copies of the same source, whose encoder parts stay in place.

Greedy, beam and sampling are strategies outside the models, written against this contract only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from seqlab.tokenizer import PAD, SOS


class DecoderState(Protocol):
    def select(self, rows: torch.Tensor, same_sources: bool = False) -> DecoderState: ...


class StepDecoder(Protocol):
    def start(self, src: torch.Tensor) -> DecoderState: ...

    def step(
        self, ids: torch.Tensor, state: DecoderState, need_weights: bool = False
    ) -> tuple[torch.Tensor, DecoderState, torch.Tensor | None]: ...


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

"""The step contract: how every decoding strategy calls a model, one output word at a time.

A model decodes step by step through three calls (``Transformer`` and ``RNNSeq2seq`` both have them):

* ``state = model.start(src)``: encode the sources (batch, src_len); nothing decoded yet;
* ``logits, state, weights = model.step(ids, state, need_weights)``: feed the previous output words
  ids (batch,), get the next word's logits (batch, vocab) and, if asked, the cross-attention weights
  (batch, layers, heads, src_len);
* ``state.select(rows, same_sources)``: keep, repeat or reorder sentences (beam search); with
  ``same_sources`` the rows only reorder copies of the same source, whose encoder parts stay in place.

Greedy, beam and sampling are strategies outside the models, written against this contract only. A model's
state is its own type (its caches); a strategy only hands it back to the model that made it.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

import torch

State = TypeVar("State", bound="DecoderState")


class DecoderState(Protocol):
    def select(self: State, rows: torch.Tensor, same_sources: bool = False) -> State: ...


class StepDecoder(Protocol[State]):
    def start(self, src: torch.Tensor) -> State: ...

    def step(
        self, ids: torch.Tensor, state: State, need_weights: bool = False
    ) -> tuple[torch.Tensor, State, torch.Tensor | None]: ...

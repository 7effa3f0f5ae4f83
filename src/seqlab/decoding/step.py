"""The step contract: how every decoding strategy calls a model, one output word at a time.

A model decodes step by step through four calls (``Transformer`` and ``RNNSeq2seq`` both have them):

* ``state = model.start(src)``: encode the sources (batch, src_len); nothing decoded yet;
* ``logits, state, weights = model.step(ids, state, need_weights)``: feed the previous output words
  ids (batch,), get the next word's logits (batch, vocab) and, if asked, the cross-attention weights
  (batch, layers, heads, src_len);
* ``state.select(rows, same_sources)``: keep, repeat or reorder sentences (beam search); with
  ``same_sources`` the rows only reorder copies of the same source, whose encoder parts stay in place;
* ``state.beams(k)``: each sentence's row repeated k times (row b·k + j: beam j of sentence b), what it has
  decoded so far included: beam search calls it after its first step, which has one beam per sentence. A state
  may keep what the beams of a sentence share (its source's parts) once per sentence: every later ``select``
  then names rows in groups of k that extend one sentence, as beam search's do.

Greedy, beam and sampling are strategies outside the models, written against this contract only. A model's
state is its own type (its caches); a strategy only hands it back to the model that made it.

``Interruptible(model, stop)`` keeps the contract and asks ``stop()`` before every call, so any strategy can be
stopped between two steps (the server's per-request deadline): the search then raises ``Cancelled``.
``NoEnd(model)`` never lets <eos> be chosen, so that every output runs to its length limit (the book's
fixed-width answers, whose vocabulary has no end symbol).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

import torch

from seqlab.specials import EOS

State = TypeVar("State", bound="DecoderState")


class DecoderState(Protocol):
    def select(self: State, rows: torch.Tensor, same_sources: bool = False) -> State: ...

    def beams(self: State, k: int) -> State: ...


class StepDecoder(Protocol[State]):
    def start(self, src: torch.Tensor) -> State: ...

    def step(
        self, ids: torch.Tensor, state: State, need_weights: bool = False
    ) -> tuple[torch.Tensor, State, torch.Tensor | None]: ...


class Cancelled(Exception):
    """A search stopped between two steps because its ``stop()`` said so."""


class Interruptible(Generic[State]):
    """``model`` under the step contract, with ``stop()`` asked before the encoder and before every step."""

    def __init__(self, model: StepDecoder[State], stop: Callable[[], bool]) -> None:
        self.model = model
        self.stop = stop

    def start(self, src: torch.Tensor) -> State:
        self._check()
        return self.model.start(src)

    def step(
        self, ids: torch.Tensor, state: State, need_weights: bool = False
    ) -> tuple[torch.Tensor, State, torch.Tensor | None]:
        self._check()
        return self.model.step(ids, state, need_weights)

    def _check(self) -> None:
        if self.stop():
            raise Cancelled("decoding stopped between two steps")


class NoEnd(Generic[State]):
    """``model`` under the step contract with <eos> out of reach (its logit −inf): outputs run to their limit."""

    def __init__(self, model: StepDecoder[State]) -> None:
        self.model = model

    def start(self, src: torch.Tensor) -> State:
        return self.model.start(src)

    def step(
        self, ids: torch.Tensor, state: State, need_weights: bool = False
    ) -> tuple[torch.Tensor, State, torch.Tensor | None]:
        logits, state, weights = self.model.step(ids, state, need_weights)
        logits[:, EOS] = -torch.inf  # this step's own logits: nothing else reads them
        return logits, state, weights

"""The slow toy version of step-by-step decoding, kept as the reference the cache is tested and timed against.

Seed 000's ``evaluate`` runs the whole decoder over the whole output prefix at
every step: O(n²) work for n words. ``PrefixDecoder(model)`` follows the same
step contract as the models (``start`` / ``step`` / ``select``) that way, using
only the teacher-forcing ``decode``; any strategy accepts it in place of the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from seqlab.model import Seq2seq


@dataclass(frozen=True)
class PrefixState:
    memory: Any  # the model's encode() output: a tensor, or a tuple of tensors (RNN)
    src_mask: torch.Tensor
    prefix: torch.Tensor  # (batch, steps): the words fed so far, <sos> first

    def select(self, rows: torch.Tensor, same_sources: bool = False) -> PrefixState:
        if same_sources:
            return PrefixState(self.memory, self.src_mask, self.prefix[rows])
        memory = tuple(m[rows] for m in self.memory) if isinstance(self.memory, tuple) else self.memory[rows]
        return PrefixState(memory, self.src_mask[rows], self.prefix[rows])

    def beams(self, k: int) -> PrefixState:
        return self.select(torch.arange(self.prefix.size(0), device=self.prefix.device).repeat_interleave(k))


class PrefixDecoder:
    def __init__(self, model: Seq2seq) -> None:
        self.model = model

    def start(self, src: torch.Tensor) -> PrefixState:
        memory, src_mask = self.model.encode(src)
        return PrefixState(memory, src_mask, torch.zeros(src.size(0), 0, dtype=torch.long))

    def step(
        self, ids: torch.Tensor, state: PrefixState, need_weights: bool = False
    ) -> tuple[torch.Tensor, PrefixState, torch.Tensor | None]:
        prefix = torch.cat([state.prefix, ids[:, None]], dim=1)  # (batch, steps)
        logits, weights = self.model.decode(prefix, state.memory, state.src_mask, need_weights)
        last = torch.stack([w[:, :, -1] for w in weights], dim=1) if weights else None  # (batch, layers, heads, src_len)
        return logits[:, -1], PrefixState(state.memory, state.src_mask, prefix), last

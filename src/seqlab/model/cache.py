"""The self-attention cache of incremental decoding (seed 004's ``past``): each layer's keys and values of the
positions decoded so far, so that a step computes only its new position.

A ``KVCache`` holds (rows, heads, capacity, depth) buffers whose first ``length`` positions are filled. ``append``
writes the new position into the buffers in place while they have room, and otherwise moves the filled positions
into buffers twice as long: a step copies one position, where ``torch.cat`` copied every position at every step.
``select`` (beam search's reordering, sentences leaving the batch) copies the filled positions of the rows it
keeps, once.

A cache stays valid as what its first ``length`` positions hold: ``append`` writes at position ``length`` only,
so an earlier step's cache still reads the same. Two appends to one cache write the same position: a search
that continues two branches of one state must ``select`` them apart first (beam search and sampling do).

``spare=False`` grows the cache by exactly the appended position (``torch.cat``): the traced ONNX step
(``seqlab.export.onnx``) takes the past in and gives it out whole, as a pure function of its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MIN_CAPACITY = 16  # positions: the first buffers hold the short outputs (dates, most sentences) without moving


@dataclass(frozen=True)
class KVCache:
    k: torch.Tensor  # (rows, heads, capacity, depth): positions [0, length) filled
    v: torch.Tensor
    length: int
    spare: bool = True  # grow with room to spare; False: exactly by each appended position

    @classmethod
    def of(cls, k: torch.Tensor, v: torch.Tensor, spare: bool = True) -> KVCache:
        """The cache of the positions in k, v (rows, heads, positions, depth), already computed (a prompt)."""
        return cls(k, v, k.size(2), spare)

    @property
    def keys(self) -> torch.Tensor:  # (rows, heads, length, depth)
        return self.k[:, :, : self.length] if self.spare else self.k

    @property
    def values(self) -> torch.Tensor:
        return self.v[:, :, : self.length] if self.spare else self.v

    def append(self, k: torch.Tensor, v: torch.Tensor) -> KVCache:
        """This cache with one more position: k, v (rows, heads, depth)."""
        if not self.spare:
            return KVCache(torch.cat([self.k, k[:, :, None]], 2), torch.cat([self.v, v[:, :, None]], 2),
                           self.length + 1, spare=False)
        cache = self if self.length < self.k.size(2) else self._moved(max(MIN_CAPACITY, 2 * (self.length + 1)))
        cache.k[:, :, self.length] = k
        cache.v[:, :, self.length] = v
        return KVCache(cache.k, cache.v, self.length + 1)

    def select(self, rows: torch.Tensor) -> KVCache:
        """Row i of the result is row ``rows[i]`` (rows,): the filled positions copied into new buffers."""
        if not self.spare:
            return KVCache(self.k.index_select(0, rows), self.v.index_select(0, rows), self.length, spare=False)
        k, v = (x.new_empty(rows.numel(), *x.shape[1:]) for x in (self.k, self.v))
        for new, old in ((k, self.keys), (v, self.values)):
            if old.requires_grad:  # a step under autograd (outside the searches): out= cannot record it
                new[:, :, : self.length] = old.index_select(0, rows)
            else:
                torch.index_select(old, 0, rows, out=new[:, :, : self.length])
        return KVCache(k, v, self.length)

    def _moved(self, capacity: int) -> KVCache:
        """The filled positions in buffers of ``capacity`` positions."""
        rows, heads, _, depth = self.k.shape
        k, v = (x.new_empty(rows, heads, capacity, depth) for x in (self.k, self.v))
        k[:, :, : self.length], v[:, :, : self.length] = self.keys, self.values
        return KVCache(k, v, self.length)

"""The self-attention cache of incremental decoding (seed 004's ``past``): each layer's keys and values of the
positions decoded so far, so that a step computes only its new position.

A ``KVCache`` holds (rows, heads, capacity, depth) buffers whose first ``length`` positions are filled. ``append``
writes the new position into the buffers in place while they have room, and otherwise moves the filled positions
into buffers twice as long: a step copies one position, where ``torch.cat`` copied every position at every step.
``select`` (beam search's reordering, sentences leaving the batch) copies the filled positions of the rows it
keeps, once.

Attention reads a ``window()`` of whole blocks of ``BLOCK`` positions, the filled ones and zeros after them, and
masks the zeros (``bias``): on the CPU, PyTorch's softmax over a last dimension shorter than 16 runs a scalar loop,
and its batched product of matrices with fewer than 400 multiply-adds a naive one, so a date's eleven positions
read as sixteen take less time than as eleven.
The positions past ``length`` are therefore kept finite (zeros) in every buffer: a zero key gives a finite logit
that the bias removes, where uninitialised memory could hold a NaN that no mask removes.

A cache stays valid as what its first ``length`` positions hold: ``append`` writes at position ``length`` only,
so an earlier step's cache still reads the same. Two appends to one cache write the same position: a search
that continues two branches of one state must ``select`` them apart first (beam search and sampling do).

``spare=False`` grows the cache by exactly the appended position (``torch.cat``): the traced ONNX step
(``seqlab.export.onnx``) takes the past in and gives it out whole, as a pure function of its inputs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from seqlab.model.attention import MASK_VALUE

BLOCK = 16  # positions: attention reads whole blocks (16 fp32 values fill one AVX-512 vector)
MIN_CAPACITY = BLOCK  # the first buffers hold the short outputs (dates, most sentences) without moving


def blocks(positions: int) -> int:
    """``positions`` rounded up to whole blocks."""
    return -(-positions // BLOCK) * BLOCK


@dataclass(frozen=True)
class KVCache:
    k: torch.Tensor  # (rows, heads, capacity, depth): positions [0, length) filled, zeros after them
    v: torch.Tensor
    length: int
    spare: bool = True  # grow with room to spare; False: exactly by each appended position

    @classmethod
    def of(cls, k: torch.Tensor, v: torch.Tensor, spare: bool = True) -> KVCache:
        """The cache of the positions in k, v (rows, heads, positions, depth), already computed (a prompt)."""
        return cls(k, v, k.size(2), spare)

    def window(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """What attention reads: K, V of the filled positions and the zeros after them up to a whole block, or to
        the capacity (rows, heads, window, depth), and the bias (1, 1, 1, window) that masks the zeros (None where
        there are none)."""
        window = min(blocks(self.length), self.k.size(2)) if self.spare else self.length
        if window == self.length:
            return self.keys, self.values, None
        return self.k[:, :, :window], self.v[:, :, :window], _zeros_bias(window, self.length, self.k.dtype,
                                                                          self.k.device)

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
        cache = self if self.length < self.k.size(2) else self._moved(max(MIN_CAPACITY, blocks(2 * (self.length + 1))))
        cache.k[:, :, self.length] = k
        cache.v[:, :, self.length] = v
        return KVCache(cache.k, cache.v, self.length + 1)

    def select(self, rows: torch.Tensor) -> KVCache:
        """Row i of the result is row ``rows[i]`` (rows,): the window's positions copied into new buffers."""
        if not self.spare:
            return KVCache(self.k.index_select(0, rows), self.v.index_select(0, rows), self.length, spare=False)
        k, v = (x.new_empty(rows.numel(), *x.shape[1:]) for x in (self.k, self.v))
        window = self.window()
        for new, old in ((k, window[0]), (v, window[1])):
            if old.requires_grad:  # a step under autograd (outside the searches): out= cannot record it
                new[:, :, : old.size(2)] = old.index_select(0, rows)
            else:
                torch.index_select(old, 0, rows, out=new[:, :, : old.size(2)])
            if old.size(2) < new.size(2):
                new[:, :, old.size(2):] = 0
        return KVCache(k, v, self.length)

    def _moved(self, capacity: int) -> KVCache:
        """The filled positions in buffers of ``capacity`` positions, zeros after them."""
        rows, heads, _, depth = self.k.shape
        k, v = (x.new_zeros(rows, heads, capacity, depth) for x in (self.k, self.v))
        k[:, :, : self.length], v[:, :, : self.length] = self.keys, self.values
        return KVCache(k, v, self.length)


@functools.lru_cache(maxsize=64)
def _zeros_bias(window: int, length: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """(1, 1, 1, window): 0 for the filled positions, the mask value for the zeros after them; made once per
    (window, length), not at every step of every layer (a step of one sentence is its number of ops)."""
    bias = (torch.arange(window, device=device) >= length).to(dtype) * MASK_VALUE
    return bias.view(1, 1, 1, window)

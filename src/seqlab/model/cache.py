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

``TableCache`` is the searches' cache on the CPU in float32: each position's keys and values are written once, into
the slots of that step's rows, and each row reads its positions through a table of slots (the rows it descends
from). Reordering beams or dropping sentences then gathers that small table of integers, not the keys and values
(``KVCache.select`` copied them all, at every step of beam search), and attention reads the positions where they
lie, in one compiled kernel (``attend_through``: scores, softmax and the weighted sum of one query in one pass, no
blocks of zeros to mask). When the buffers grow, each row's positions move into a slot of its own
(``TableCache._fitting``): what the rows still read, not the slots of sentences that have ended.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch
from numba import njit

from seqlab.model.attention import MASK_VALUE, one_query_attention

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
    def rows(self) -> int:
        return self.k.size(0)

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

    def attend(self, q: torch.Tensor) -> torch.Tensor:
        """q (rows, heads · depth), scaled by 1/sqrt(d_k) -> softmax(q K^T) V over the filled positions (rows,
        heads · depth)."""
        return one_query_attention(q, *self.window())[0]

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


@njit(inline="always", fastmath=True)
def exp_nonpositive(x: np.ndarray, out: np.ndarray, bits: np.ndarray) -> None:  # pragma: no cover (compiled)
    """out[i] = exp(x[i]) for x[i] <= 0, within 2 units in the last place (float32), exp(0) = 1 exactly: Cephes'
    expf, e^x = 2^n · e^r with n = round(x / ln 2) and e^r a polynomial of degree 7 on |r| <= ln(2)/2, written so
    that the compiler vectorises it (numba calls the C library's expf one value at a time, 20 ns each: most of
    ``attend_through``'s time before). 2^n is added to the exponent's bits; x below -87 counts as -87 (e^-87
    ≈ 1.6e-38, the smallest normal float32's order), far below what a softmax weight can notice. ``bits``: scratch,
    int32, as long as x."""
    for i in range(x.size):
        clipped = max(x[i], np.float32(-87.0))
        n = np.floor(clipped * np.float32(1.44269504088896341) + np.float32(0.5))  # round(x / ln 2)
        r = clipped - n * np.float32(0.693359375) + n * np.float32(2.12194440e-4)  # x - n ln 2, in two parts
        p = np.float32(1.9875691500e-4) * r + np.float32(1.3981999507e-3)
        p = p * r + np.float32(8.3334519073e-3)
        p = p * r + np.float32(4.1665795894e-2)
        p = p * r + np.float32(1.6666665459e-1)
        p = p * r + np.float32(5.0000001201e-1)
        out[i] = p * r * r + r + np.float32(1.0)  # e^r
        bits[i] = np.int32(n) << 23
    exponents = out.view(np.int32)
    for i in range(x.size):
        exponents[i] += bits[i]  # e^r · 2^n


@njit(nogil=True, fastmath=True, cache=True, error_model="numpy")
def attend_through(q: np.ndarray, k: np.ndarray, v: np.ndarray, table: np.ndarray, length: int,
                   out: np.ndarray) -> None:  # pragma: no cover (compiled; tested through TableCache.attend)
    """softmax(q K^T) V for one query per row and head (seed 000's attention, one position), row r's position t
    read from slot ``table[r, t]``.

    q (rows, heads · depth), already scaled by 1/sqrt(d_k); k, v (capacity, slots, heads, depth); table (rows,
    capacity); the first ``length`` positions are read; out (rows, heads · depth). A row's heads go together, as
    one vector of heads · depth: each position's keys and values of all heads lie side by side, read once, and
    every loop over them runs in vector registers; the exponentials of a row's scores at once
    (``exp_nonpositive``)."""
    capacity, slots, heads, depth = k.shape
    rows, width = q.shape
    keys, values = k.reshape(capacity, slots, width), v.reshape(capacity, slots, width)
    query, products = np.empty(width, dtype=np.float32), np.empty(width, dtype=np.float32)
    scores = np.empty(heads * length, dtype=np.float32)  # head h's position t at h · length + t
    weights = np.empty(heads * length, dtype=np.float32)
    bits = np.empty(heads * length, dtype=np.int32)
    spread = np.empty(width, dtype=np.float32)  # position t's weight of head h at each of h's depth entries
    mixed = np.empty(width, dtype=np.float32)  # the row's weighted sum of values
    for r in range(rows):
        query[:] = q[r]  # contiguous: q is a column slice of the step's stacked projections
        for t in range(length):
            key = keys[t, table[r, t]]
            for j in range(width):
                products[j] = query[j] * key[j]
            for h in range(heads):
                total = np.float32(0.0)
                for d in range(depth):
                    total += products[h * depth + d]
                scores[h * length + t] = total
        for h in range(heads):  # softmax over the positions: e^(s - max) / sum
            top = scores[h * length]
            for t in range(1, length):
                top = max(top, scores[h * length + t])
            for t in range(length):
                scores[h * length + t] -= top
        exp_nonpositive(scores, weights, bits)
        for h in range(heads):
            norm = np.float32(0.0)
            for t in range(length):
                norm += weights[h * length + t]
            for t in range(length):
                weights[h * length + t] /= norm
        mixed[:] = 0.0
        for t in range(length):
            value = values[t, table[r, t]]
            for h in range(heads):
                for d in range(depth):
                    spread[h * depth + d] = weights[h * length + t]
            for j in range(width):
                mixed[j] += spread[j] * value[j]
        out[r] = mixed


def _own_slots(rows: int, capacity: int, device: torch.device) -> torch.Tensor:
    """A table (rows, capacity) in which row r reads every position from slot r."""
    return torch.arange(rows, device=device)[:, None].expand(rows, capacity).contiguous()


@dataclass(frozen=True)
class TableCache:
    """A self-attention cache whose rows read their positions through a table of slots (the module's docstring).

    Appending writes the new position of every row into that position's slots 0..rows-1, in place, as
    ``KVCache.append`` writes position ``length``: a cache stays valid as what its first ``length`` positions hold."""

    k: torch.Tensor  # (capacity, slots, heads, depth): position t of the rows that had it, slot by slot
    v: torch.Tensor
    table: torch.Tensor  # (rows, capacity) int64: row r's position t lies in slot table[r, t]
    length: int

    @classmethod
    def of(cls, k: torch.Tensor, v: torch.Tensor) -> TableCache:
        """The cache of the positions in k, v (rows, heads, positions, depth), already computed (a prompt)."""
        rows, _, positions, _ = k.shape
        capacity = max(MIN_CAPACITY, blocks(positions))
        table = _own_slots(rows, capacity, k.device)
        buffers = [x.new_empty(capacity, rows, x.size(1), x.size(3)) for x in (k, v)]
        for buffer, x in zip(buffers, (k, v)):
            buffer[:positions] = x.permute(2, 0, 1, 3)
        return cls(buffers[0], buffers[1], table, positions)

    @property
    def rows(self) -> int:
        return self.table.size(0)

    @property
    def keys(self) -> torch.Tensor:  # (rows, heads, length, depth): each row's positions gathered (a copy)
        return self._gathered(self.k)

    @property
    def values(self) -> torch.Tensor:
        return self._gathered(self.v)

    def _gathered(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(self.length, device=x.device)
        return x[positions[None, :], self.table[:, : self.length]].transpose(1, 2)  # (rows, heads, length, depth)

    def append(self, k: torch.Tensor, v: torch.Tensor) -> TableCache:
        """This cache with one more position: k, v (rows, heads, depth), row i's in slot i."""
        rows = k.size(0)
        cache = self._fitting(rows)
        cache.k[self.length, :rows] = k
        cache.v[self.length, :rows] = v
        cache.table[:, self.length] = torch.arange(rows, device=k.device)
        return TableCache(cache.k, cache.v, cache.table, self.length + 1)

    def select(self, rows: torch.Tensor) -> TableCache:
        """Row i of the result is row ``rows[i]`` (rows,): its row of the table, nothing else copied."""
        return TableCache(self.k, self.v, self.table.index_select(0, rows), self.length)

    def attend(self, q: torch.Tensor) -> torch.Tensor:
        """q (rows, heads · depth), scaled by 1/sqrt(d_k) -> softmax(q K^T) V over each row's positions (rows,
        heads · depth): ``one_query_attention`` over ``KVCache.window()``, without reordered copies or masked
        zeros."""
        out = torch.empty_like(q, memory_format=torch.contiguous_format)  # (rows, heads · depth)
        attend_through(q.numpy(), self.k.numpy(), self.v.numpy(), self.table.numpy(), self.length, out.numpy())
        return out

    def _fitting(self, rows: int) -> TableCache:
        """This cache, or its rows' filled positions moved into buffers with room for one more position of its
        ``rows`` rows (more positions: twice as many; more slots: beam search's rows after its first step).

        A move copies what the rows read, not the buffers: row r's position t, from slot ``table[r, t]``, into
        slot r (the table then one slot per row). The slots of sentences that have left the batch and of beams
        that were dropped stay behind: on the Multi30k test split at beam 5, where one long output keeps its batch
        going, copying the whole buffers (48 positions of 1,160 slots into buffers for 112) took a tenth of the
        search's time (issue 37)."""
        capacity, slots = self.k.shape[:2]
        if self.length < capacity and rows <= slots:
            return self
        if self.length >= capacity:
            capacity = blocks(2 * (self.length + 1))
        k, v = (x.new_empty(capacity, rows, *x.shape[2:]) for x in (self.k, self.v))
        positions = torch.arange(self.length, device=self.table.device)[:, None]  # (length, 1)
        read = self.table[:, : self.length].t()  # (length, rows): the slot each row reads each position from
        k[: self.length], v[: self.length] = self.k[positions, read], self.v[positions, read]  # (length, rows, ...)
        table = _own_slots(rows, capacity, self.table.device)
        return TableCache(k, v, table, self.length)


Cache = KVCache | TableCache


def searching(k: torch.Tensor, v: torch.Tensor) -> Cache:
    """The cache a search continues from the positions in k, v (rows, heads, positions, depth; none at a
    translation's start): a ``TableCache`` where its kernel runs (on the CPU, in float32, outside autograd), a
    ``KVCache`` elsewhere."""
    if k.device.type == "cpu" and k.dtype == torch.float32 and not torch.is_grad_enabled():
        return TableCache.of(k, v)
    return KVCache.of(k, v)

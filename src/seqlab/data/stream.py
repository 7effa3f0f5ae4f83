"""A corpus as one token stream, cut for truncated BPTT (seed 002 §5.2.4–5.2.5, the book's ``RnnlmTrainer``).

A language model reads its corpus as one long stream of ids: ``xs = corpus[:-1]`` is fed, ``ts = corpus[1:]``
is predicted. ``batch_size`` rows read the stream in parallel from the book's offsets ``i · jump``,
``jump = len(xs) // batch_size``, and every batch moves each row ``time_size`` positions on:
``batch_x[i, t] = xs[(offset_i + time_idx) % len(xs)]``. So row ``i`` of batch ``k + 1`` continues row ``i`` of
batch ``k``, and a model that carries its hidden state from one batch to the next (detached: the backward
path is cut, the forward one kept) reads each row as one unbroken text. An epoch has
``len(xs) // (batch_size · time_size)`` batches.

The stream is anything that has a length and gives a slice of itself as an array: ids in memory, or a prepared
directory's stream read from its shards (``prepared.TokenStream``); a batch reads only its rows' windows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np


class Stream(Protocol):
    def __len__(self) -> int: ...

    def __getitem__(self, index: slice, /) -> np.ndarray: ...


class TbpttBatches:
    """One epoch of ``corpus`` (n,) for truncated BPTT: ``batches[k]`` is (inputs, targets), each (batch_size,
    time_size) int64, read from the stream when asked for (``rows`` for some of a batch's rows only).

    The seed's toy: ``corpus = [0, 1, 2, 3, 4, 1, 5, 6]``, batch 2, T 3 -> one batch, inputs
    ``[[0, 1, 2], [3, 4, 1]]`` and targets ``[[1, 2, 3], [4, 1, 5]]``. No row wraps around the stream's end: the
    last row's last target is at most ``corpus[n - 1]``, as ``jump ≥ batches · time_size``."""

    def __init__(self, corpus: Stream, batch_size: int, time_size: int) -> None:
        size = len(corpus) - 1  # inputs: every id but the last
        self.batches = size // (batch_size * time_size)
        if self.batches == 0:
            raise ValueError(f"a stream of {size + 1} tokens is too short for one batch of {batch_size} × {time_size}")
        self.corpus, self.batch_size, self.time_size = corpus, batch_size, time_size
        self.offsets = np.arange(batch_size) * (size // batch_size)  # (B,) where each row starts

    def __len__(self) -> int:
        return self.batches

    def __getitem__(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        if not 0 <= k < self.batches:
            raise IndexError(k)
        return self.rows(k, slice(None))

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return (self[k] for k in range(self.batches))

    def rows(self, k: int, rows: slice) -> tuple[np.ndarray, np.ndarray]:
        """Batch ``k``'s inputs and targets (rows, T) for ``rows`` of its rows: each row's window of T + 1 ids."""
        starts = self.offsets[rows] + k * self.time_size
        windows = np.stack([self.corpus[s:s + self.time_size + 1] for s in starts]).astype(np.int64)  # (rows, T + 1)
        return np.ascontiguousarray(windows[:, :-1]), np.ascontiguousarray(windows[:, 1:])

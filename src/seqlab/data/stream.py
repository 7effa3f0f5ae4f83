"""A corpus as one token stream, cut for truncated BPTT (seed 002 §5.2.4–5.2.5, the book's ``RnnlmTrainer``).

A language model reads its corpus as one long stream of ids: ``xs = corpus[:-1]`` is fed, ``ts = corpus[1:]``
is predicted. ``batch_size`` rows read the stream in parallel from the book's offsets ``i · jump``,
``jump = len(xs) // batch_size``, and every batch moves each row ``time_size`` positions on:
``batch_x[i, t] = xs[(offset_i + time_idx) % len(xs)]``. So row ``i`` of batch ``k + 1`` continues row ``i`` of
batch ``k``, and a model that carries its hidden state from one batch to the next (detached: the backward
path is cut, the forward one kept) reads each row as one unbroken text. An epoch has
``len(xs) // (batch_size · time_size)`` batches.
"""

from __future__ import annotations

import numpy as np


def tbptt_batches(corpus: np.ndarray, batch_size: int, time_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets), each (batches, batch_size, time_size): one epoch of the stream ``corpus`` (n,).

    The seed's toy: ``corpus = [0, 1, 2, 3, 4, 1, 5, 6]``, batch 2, T 3 -> one batch, inputs
    ``[[0, 1, 2], [3, 4, 1]]`` and targets ``[[1, 2, 3], [4, 1, 5]]``."""
    xs, ts = np.asarray(corpus[:-1]), np.asarray(corpus[1:])
    size = len(xs)
    batches = size // (batch_size * time_size)
    if batches == 0:
        raise ValueError(f"a stream of {size + 1} tokens is too short for one batch of {batch_size} × {time_size}")
    jump = size // batch_size
    offsets = np.arange(batch_size) * jump  # (B,)
    positions = offsets[None, :, None] + np.arange(batches * time_size).reshape(batches, 1, time_size)  # (K, B, T)
    positions %= size
    return xs[positions], ts[positions]

"""BERT's inputs (seed 002 §10.1, S98–S99): one sentence as ``<sos> A <eos>`` (``[CLS] A [SEP]``), a pair as
``<sos> A <eos> B <eos>`` with segment ids 0 for A (and its <sos>, <eos>) and 1 for B; and the masked-language-
model corruption: each ordinary token is chosen with ``probability`` (BERT: 15 %); of the chosen, 80 % become
``<mask>``, 10 % a random ordinary token, 10 % stay as they are; the model predicts the original token at the
chosen positions only (the labels elsewhere are ``IGNORE``). ``<pad>``, ``<sos>`` and ``<eos>`` are never chosen.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from seqlab.specials import EOS, MASK, PAD, SOS

IGNORE = -100  # a label that the loss skips (torch's cross_entropy ignore_index default)


def single(ids: Sequence[int], limit: int) -> list[int]:
    """``<sos> ids <eos>``, the ids cut to fit ``limit`` positions."""
    return [SOS, *ids[: limit - 2], EOS]


def pair(a: Sequence[int], b: Sequence[int], limit: int) -> tuple[list[int], list[int]]:
    """``<sos> a <eos> b <eos>`` and its segment ids; while too long, the longer sentence loses its last token
    (BERT's truncation)."""
    a, b = list(a), list(b)
    while len(a) + len(b) > limit - 3:
        (a if len(a) >= len(b) else b).pop()
    return [SOS, *a, EOS, *b, EOS], [0] * (len(a) + 2) + [1] * (len(b) + 1)


def mask_tokens(
    ids: np.ndarray, rng: np.random.Generator, probability: float, split: Sequence[float], ordinary: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """ids (batch, len) -> the corrupted inputs and the labels (batch, len): the original id where a token was
    chosen, ``IGNORE`` elsewhere. ``split``: the shares of the chosen that become <mask>, a random token drawn
    uniformly from ``ordinary`` (low, high), or stay. At least one token of the batch is chosen."""
    maskable = ~np.isin(ids, (PAD, SOS, EOS))
    chosen = maskable & (rng.random(ids.shape) < probability)
    if not chosen.any() and maskable.any():
        candidates = np.flatnonzero(maskable)
        chosen.flat[candidates[rng.integers(len(candidates))]] = True
    fate = rng.random(ids.shape)
    inputs = ids.copy()
    inputs[chosen & (fate < split[0])] = MASK
    randomised = chosen & (fate >= split[0]) & (fate < split[0] + split[1])
    inputs[randomised] = rng.integers(ordinary[0], ordinary[1], size=int(randomised.sum()))
    return inputs, np.where(chosen, ids, IGNORE)

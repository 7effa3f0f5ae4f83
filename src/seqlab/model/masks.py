"""Padding and look-ahead masks, in the seed's convention: ``True`` (1) marks a position to hide; and the token
ids a model is shown to trace its structure (``example_ids``).

Seed 000: ``create_padding_mask`` hides key columns holding PAD (id 0),
shape (batch, 1, 1, len); ``create_look_ahead_mask`` hides future positions
*and* padding, ``maximum(look_ahead, padding)``, shape (batch, 1, len, len).
Attention adds ``mask * -1e9`` to its logits (see ``attention.py``).
"""

from __future__ import annotations

import torch

from seqlab.specials import PAD, SPECIALS


def padding_mask(ids: torch.Tensor) -> torch.Tensor:
    """(batch, len) token ids -> (batch, 1, 1, len) bool, True at PAD."""
    return (ids == PAD)[:, None, None, :]


def look_ahead_mask(ids: torch.Tensor) -> torch.Tensor:
    """(batch, len) token ids -> (batch, 1, len, len) bool, True above the diagonal or at PAD keys."""
    length = ids.size(1)
    future = torch.triu(torch.ones(length, length, dtype=torch.bool, device=ids.device), diagonal=1)
    return future[None, None] | padding_mask(ids)  # (batch, 1, len, len)


def example_ids(vocab_size: int, batch: int = 2, length: int = 8) -> torch.Tensor:
    """(batch, length) random ids of ordinary tokens (no special): what a model's ``example_inputs`` feed it to
    trace its layers (``seqlab plot model``)."""
    return torch.randint(len(SPECIALS), max(vocab_size, len(SPECIALS) + 1), (batch, length))

"""Sinusoidal positional encoding (seed 000 ``PositionalEncoding``; Vaswani et al. §3.5).

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

Angles are in radians. The table is *added* to the (scaled) token embeddings.
"""

from __future__ import annotations

import torch
from torch import nn


def sinusoidal_table(length: int, d_model: int) -> torch.Tensor:
    """The (1, length, d_model) table; the seed's ``angles = 1 / 10000^(2*(i//2) / d_model)``."""
    pos = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # (length, 1)
    i = torch.arange(d_model, dtype=torch.float64)  # (d_model,)
    angles = pos / torch.pow(10000.0, (2 * (i // 2)) / d_model)  # (length, d_model)
    table = torch.empty(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles[:, 0::2])
    table[:, 1::2] = torch.cos(angles[:, 1::2])
    return table.float().unsqueeze(0)  # (1, length, d_model)


class PositionalEncoding(nn.Module):
    """Adds ``PE[:, :seq_len]`` to its input, as the seed's ``call`` does."""

    table: torch.Tensor  # (1, max_length, d_model), a buffer

    def __init__(self, d_model: int, max_length: int) -> None:
        super().__init__()
        self.register_buffer("table", sinusoidal_table(max_length, d_model), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x (batch, seq_len, d_model) at positions offset .. offset + seq_len - 1 (incremental decoding
        feeds one position at a time)."""
        end = offset + x.size(1)
        if end > self.table.size(1):
            raise ValueError(f"sequence of {end} positions exceeds the positional table ({self.table.size(1)})")
        return x + self.table[:, offset:end]

"""Dropout (Srivastava et al. 2014; seed 000 ``Dropout(rate)``): zero each element with probability p,
scale the rest by 1 / (1 - p) during training, pass everything through at evaluation.

The same as ``torch.nn.Dropout``, with cheaper random numbers. On the CPU, torch draws
one 32-bit Mersenne-Twister number per element (``bernoulli_``), a large share of a
small Transformer's training step (``benchmarks/profile_ops.py train CONFIG`` shows
it). Here one 32-bit draw decides two elements: each 16-bit half is compared
with p · 2^16, so p is used to within 2^-16 (0.1 becomes 6554 / 65536 = 0.100006).
The mask is drawn from torch's generator, so ``torch.manual_seed`` makes it
reproducible, and a resumed run continues the same stream.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def keep_mask(shape: torch.Size, p: float, dtype: torch.dtype, device: torch.device | None = None) -> torch.Tensor:
    """A tensor of ``shape`` holding 1 / (1 - p) where an element is kept and 0 where it is dropped."""
    numel = math.prod(shape)
    bits = torch.empty((numel + 1) // 2, dtype=torch.int32, device=device).random_(-(2**31), 2**31)  # 32 bits each
    halves = bits.view(torch.int16)[:numel].view(shape)  # uniform over -32768 .. 32767
    threshold = round(p * 2**16) - 2**15  # P(half < threshold) = p, to 2^-16
    return (halves >= threshold).to(dtype) * (1.0 / (1.0 - p))


class Dropout(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        return x * keep_mask(x.shape, self.p, x.dtype, x.device)

    def extra_repr(self) -> str:
        return f"p={self.p}"

"""Dropout (Srivastava et al. 2014; seed 000 ``Dropout(rate)``): zero each element with probability p,
scale the rest by 1 / (1 - p) during training, pass everything through at evaluation.

The same as ``torch.nn.Dropout``, with cheaper random numbers. On the CPU, torch draws
one Mersenne-Twister number per element (``bernoulli_``), a large share of a
small Transformer's training step (``benchmarks/profile_ops.py train CONFIG`` shows
it). Here one 64-bit draw decides three elements: ``random_`` on int64 gives 63 random
bits, and each 16-bit quarter of the low 48 is compared with p · 2^16, so p is used to
within 2^-16 (0.1 becomes 6554 / 65536 = 0.100006). A 64-bit draw cost torch less than a
32-bit draw in a range (about 9 against 12 ns on the Xeon of docs/benchmarks.md), so a
mask of 261,120 elements took 1.5 ms instead of 3.0 in fp32.
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
    draws = torch.empty((numel + 2) // 3, dtype=torch.int64, device=device).random_()  # 63 random bits each
    quarters = draws.view(torch.int16).view(-1, 4)[:, :3]  # (draws, 3): the low 48 bits, uniform over -32768 .. 32767
    threshold = round(p * 2**16) - 2**15  # P(quarter < threshold) = p, to 2^-16
    kept = (quarters >= threshold).reshape(-1)[:numel].view(shape)
    return kept.to(dtype) * (1.0 / (1.0 - p))


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

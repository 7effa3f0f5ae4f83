"""The warm-up learning-rate schedule (seed 000 ``CustomSchedule``; Vaswani et al. §5.3).

    lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)

linear growth for ``warmup_steps`` steps, then decay with the inverse square
root of the step. ``scale`` multiplies the whole curve (the seed's is 1).
"""

from __future__ import annotations

import torch
from torch.optim.lr_scheduler import LambdaLR


def transformer_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """The learning rate at ``step`` (counted from 1)."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def transformer_schedule(optimizer: torch.optim.Optimizer, d_model: int, warmup: int, scale: float) -> LambdaLR:
    """A scheduler for an optimizer built with lr=1.0; call ``.step()`` after every optimizer step."""
    return LambdaLR(optimizer, lambda done: transformer_lr(done + 1, d_model, warmup, scale))

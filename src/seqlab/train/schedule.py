"""Learning-rate schedules: the seed's warm-up schedule, cosine decay for the RNNs, BERT's linear warm-up and decay.

The warm-up schedule (seed 000 ``CustomSchedule``; Vaswani et al. §5.3):

    lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)

linear growth for ``warmup_steps`` steps, then decay with the inverse square
root of the step. ``scale`` multiplies the whole curve (the seed's is 1).

Cosine decay (Loshchilov & Hutter 2017, without restarts): ``lr`` at the first
step, falling along a half cosine to 0 at the last. The book trains its RNNs
at a constant Adam 1e-3 and its accuracy swings by several points from one
epoch to the next; decaying the rate settles it (docs/results.md).

BERT's (Devlin et al. 2019, §A.2): a linear rise to ``lr`` over the first ``warmup`` steps (10,000 of 1M there),
then a linear fall to 0 at the last step.
"""

from __future__ import annotations

import math

import torch
from torch.optim.lr_scheduler import LambdaLR

from seqlab.config import Config
from seqlab.model.transformer import TransformerConfig


def transformer_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """The learning rate at ``step`` (counted from 1)."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def transformer_schedule(optimizer: torch.optim.Optimizer, d_model: int, warmup: int, scale: float) -> LambdaLR:
    """A scheduler for an optimizer built with lr=1.0; call ``.step()`` after every optimizer step."""
    return LambdaLR(optimizer, lambda done: transformer_lr(done + 1, d_model, warmup, scale))


def cosine_lr(step: int, lr: float, total: int) -> float:
    """The rate after ``step`` of ``total`` steps (counted from 0); 0 from ``total`` on."""
    return 0.5 * lr * (1 + math.cos(math.pi * min(step, total) / total))


def cosine_schedule(optimizer: torch.optim.Optimizer, lr: float, total: int) -> LambdaLR:
    """A scheduler for an optimizer built with lr=1.0; call ``.step()`` after every optimizer step."""
    return LambdaLR(optimizer, lambda done: cosine_lr(done, lr, total))


def linear_lr(step: int, lr: float, warmup: int, total: int) -> float:
    """BERT's rate after ``step`` steps (counted from 0): up in a line to ``lr`` over ``warmup`` steps, then
    down in a line to 0 at ``total`` (and 0 from there on)."""
    if step < warmup:
        return lr * (step + 1) / warmup
    return lr * max(0.0, (total - step) / max(1, total - warmup))


def build_schedule(optimizer: torch.optim.Optimizer, config: Config, total_steps: int) -> LambdaLR:
    """``train.schedule``: the seed's warm-up schedule (Transformers), ``train.lr`` throughout (the book's RNNs:
    Adam 1e-3), cosine decay from ``train.lr`` to 0 at ``total_steps`` (epochs × the first epoch's batches), or
    BERT's linear warm-up and decay to 0 at ``total_steps``."""
    cfg = config.train
    if cfg.schedule == "transformer":
        assert isinstance(config.model, TransformerConfig)  # Config refuses the transformer schedule for an RNN
        return transformer_schedule(optimizer, config.model.d_model, cfg.warmup, cfg.lr_scale)
    if cfg.schedule == "cosine":
        return cosine_schedule(optimizer, cfg.lr, total_steps)
    if cfg.schedule == "linear":
        return LambdaLR(optimizer, lambda done: linear_lr(done, cfg.lr, cfg.warmup, total_steps))
    return LambdaLR(optimizer, lambda step: cfg.lr)  # constant; plateau: see reduce_on_plateau


def reduce_on_plateau(scheduler: LambdaLR, factor: float) -> float:
    """Divide the rate by ``factor`` from now on (schedule ``plateau``, the book's ``lr /= 4.0`` when valid
    perplexity does not improve); the scheduler's base rates hold it, so a checkpoint keeps it. Returns the rate."""
    scheduler.base_lrs = [base / factor for base in scheduler.base_lrs]
    for group, base in zip(scheduler.optimizer.param_groups, scheduler.base_lrs):
        group["lr"] = base * scheduler.lr_lambdas[0](scheduler.last_epoch)
    return scheduler.optimizer.param_groups[0]["lr"]

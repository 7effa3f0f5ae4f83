"""The optimizer (Adam, or SGD for the book's language models) and one optimisation step: what every model
family and the throughput benchmark share.

Adam by default with the Transformer paper's β₂ = 0.98 and ε = 1e-9 (seed 000's ``Adam(learning_rate,
beta_1=0.9, beta_2=0.98, epsilon=1e-9)``; ``train.adam_betas`` / ``train.adam_eps`` give the book's), built
with ``lr=1.0`` so that the schedule's factor is the learning rate (``schedule.build_schedule``).
"""

from __future__ import annotations

import torch
from torch import nn

from seqlab.sections import TrainConfig


def build_optimizer(model: nn.Module, train: TrainConfig) -> torch.optim.Optimizer:
    """``train.optimizer``: Adam, or plain SGD (the book's language models), built with ``lr=1.0``; AdamW where
    ``train.weight_decay`` is set, over two groups (``decay_groups``)."""
    if train.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=1.0)
    # fused: one kernel for all parameters (about 6× faster than the per-parameter loop on CPU)
    if train.weight_decay:
        return torch.optim.AdamW(decay_groups(model, train.weight_decay), lr=1.0, betas=train.adam_betas,
                                 eps=train.adam_eps, fused=True)
    return torch.optim.Adam(model.parameters(), lr=1.0, betas=train.adam_betas, eps=train.adam_eps, fused=True)


def decay_groups(model: nn.Module, weight_decay: float) -> list[dict[str, object]]:
    """BERT's exclusions (Devlin et al. 2019; Loshchilov & Hutter's decoupled decay): the weight matrices and
    embeddings decay, the biases and the LayerNorms' gains and shifts (every parameter of one dimension) do not."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def optimizer_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    loss: torch.Tensor,
    clip_norm: float | None,
) -> None:
    """Backward from ``loss`` (a mean over the batch's tokens), then ``apply_gradients``."""
    loss.backward()
    apply_gradients(model, optimizer, scheduler, clip_norm)


def apply_gradients(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    clip_norm: float | None,
    scaler: torch.amp.GradScaler | None = None,
) -> None:
    """Clip the gradient norm, step Adam and the schedule, and clear the gradients. With fp16's gradient
    ``scaler`` (``precision.grad_scaler``): the gradients are unscaled before clipping, and a step whose gradients
    overflowed is skipped while the scale shrinks."""
    if scaler is not None:
        scaler.unscale_(optimizer)
    if clip_norm:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)

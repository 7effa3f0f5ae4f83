"""Cosine decay and BERT's linear schedule, checked against torch's own schedulers; decoupled weight decay against
torch's AdamW over BERT's named exclusions (the warm-up schedule: test_transformer_seed.py)."""

import pytest
import torch
from torch import nn

from seqlab.config import Config
from seqlab.sections import TrainConfig
from seqlab.train.optimizer import build_optimizer
from seqlab.train.schedule import build_schedule, cosine_lr, cosine_schedule, linear_lr


def test_cosine_matches_torch_cosine_annealing():
    total, lr = 40, 2e-3
    ours = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    theirs = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    ours_schedule = cosine_schedule(ours, lr, total)
    theirs_schedule = torch.optim.lr_scheduler.CosineAnnealingLR(theirs, T_max=total)
    for _ in range(total):
        assert ours_schedule.get_last_lr()[0] == pytest.approx(theirs_schedule.get_last_lr()[0], rel=1e-9, abs=1e-15)
        ours.step()
        theirs.step()
        ours_schedule.step()
        theirs_schedule.step()


def test_cosine_starts_at_lr_halves_midway_and_stays_at_zero():
    assert cosine_lr(0, 1e-3, 100) == 1e-3
    assert cosine_lr(50, 1e-3, 100) == pytest.approx(5e-4)
    assert cosine_lr(100, 1e-3, 100) == cosine_lr(130, 1e-3, 100) == 0.0


def test_linear_matches_torch_linear_warm_up_then_decay():
    """BERT's schedule as torch composes it: LinearLR up over the warm-up, then LinearLR down to 0."""
    total, warmup, lr = 30, 6, 1e-4
    ours = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    theirs = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=lr)
    config = Config.model_validate({"data": {"corpus": {"format": "task", "task": "date"}},
                                    "train": {"schedule": "linear", "lr": lr, "warmup": warmup}})
    ours_schedule = build_schedule(ours, config, total)
    theirs_schedule = torch.optim.lr_scheduler.SequentialLR(theirs, [
        torch.optim.lr_scheduler.LinearLR(theirs, start_factor=1 / warmup, total_iters=warmup - 1),
        torch.optim.lr_scheduler.LinearLR(theirs, start_factor=1.0, end_factor=0.0, total_iters=total - warmup),
    ], milestones=[warmup])
    for _ in range(total + 3):
        assert ours_schedule.get_last_lr()[0] == pytest.approx(theirs_schedule.get_last_lr()[0], rel=1e-9, abs=1e-15)
        ours.step()
        theirs.step()
        ours_schedule.step()
        theirs_schedule.step()
    assert linear_lr(warmup - 1, lr, warmup, total) == linear_lr(warmup, lr, warmup, total) == lr
    assert linear_lr(total, lr, warmup, total) == 0.0


class _Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(7, 4)
        self.dense = nn.Linear(4, 4)
        self.LayerNorm = nn.LayerNorm(4)  # BERT's name, so that the reference below can exclude it by name


def test_weight_decay_is_adamw_off_biases_and_layer_norms():
    torch.manual_seed(0)
    ours, theirs = _Tiny(), _Tiny()
    theirs.load_state_dict(ours.state_dict())
    train = TrainConfig(weight_decay=0.01, adam_betas=(0.9, 0.999), adam_eps=1e-6)
    optimizer = build_optimizer(ours, train)
    named = dict(theirs.named_parameters())
    excluded = {name for name in named if name.endswith("bias") or "LayerNorm" in name}  # BERT's list
    reference = torch.optim.AdamW([
        {"params": [p for n, p in named.items() if n not in excluded], "weight_decay": 0.01},
        {"params": [p for n, p in named.items() if n in excluded], "weight_decay": 0.0},
    ], lr=0.5, betas=(0.9, 0.999), eps=1e-6)
    for group in optimizer.param_groups:
        group["lr"] = 0.5
    for _ in range(3):
        for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
            a.grad = torch.randn_like(a)
            b.grad = a.grad.clone()
        optimizer.step()
        reference.step()
    for (name, a), b in zip(ours.named_parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(a, b, msg=name)


def test_weight_decay_shrinks_weights_not_biases():
    """With no gradient Adam's own update is 0, so what moves is the decay: W (1 − lr·λ), biases unchanged."""
    model = _Tiny()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = build_optimizer(model, TrainConfig(weight_decay=0.1))
    for group in optimizer.param_groups:
        group["lr"] = 0.5
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    for name, p in model.named_parameters():
        expected = before[name] * (1 - 0.05) if p.dim() >= 2 else before[name]
        torch.testing.assert_close(p.detach(), expected, msg=name)


@pytest.mark.parametrize("bad", [{"optimizer": "sgd"}, {"engine": "numpy"}])
def test_weight_decay_needs_adam_on_torch(bad):
    with pytest.raises(ValueError, match="train.weight_decay is decoupled Adam's"):
        TrainConfig(weight_decay=0.01, **bad)

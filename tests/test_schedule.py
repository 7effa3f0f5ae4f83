"""Cosine decay, checked against torch's own CosineAnnealingLR (the warm-up schedule: test_transformer_seed.py)."""

import pytest
import torch

from seqlab.train.schedule import cosine_lr, cosine_schedule


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

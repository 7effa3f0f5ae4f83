"""NT-AvSGD (AWD-LSTM's averaged SGD, ``train.nt_asgd``): the trigger, the running mean, and a run that averages."""

from __future__ import annotations

import pytest
import torch
from conftest import counting_corpus
from torch import nn

from seqlab.config import ConfigError, parse_config
from seqlab.rundir import RunDir
from seqlab.train.averaged_sgd import NTAverage
from seqlab.train.trainer import Trainer


def test_averaging_starts_after_a_loss_worse_than_the_best_before_the_interval():
    # AWD-LSTM: switch when val_loss > min(best_val_loss[:-nonmono]) with more than nonmono losses before it
    model = nn.Linear(2, 2)
    average = NTAverage(2)
    started = [average.observe(model, loss) for loss in [5.0, 4.0, 3.0, 3.5, 3.9, 4.5, 6.0]]
    # 3.5 is not above min(5), 3.9 not above min(5, 4); 4.5 is above min(5, 4, 3); then it has started
    assert started == [False, False, False, False, False, True, False]
    assert average.count == 1 and len(average.losses) == 7
    assert not any(NTAverage(0).observe(model, loss) for loss in [1.0, 2.0, 3.0, 4.0])  # 0: never


def test_the_running_mean_is_the_mean_of_the_weights_since_the_start_and_is_applied_only_inside():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1))
    model[1].bias.requires_grad_(False)  # frozen parameters are not averaged (they do not change)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    average = NTAverage(1)
    for loss in [2.0, 1.0]:
        average.observe(model, loss)
    assert average.observe(model, 3.0)  # 3 > min(2): averaging starts from the present weights
    seen = [[p.detach().clone() for p in model.parameters()]]
    for _ in range(4):
        model(torch.randn(5, 3)).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        average.update(model)
        seen.append([p.detach().clone() for p in model.parameters()])
    trained = [p.detach().clone() for p in model.parameters()]
    with average.applied(model):
        for p, history in zip(model.parameters(), zip(*seen)):
            torch.testing.assert_close(p.detach(), torch.stack(history).mean(0))
    for p, t in zip(model.parameters(), trained):
        assert torch.equal(p.detach(), t)  # the trained weights are back
    again = NTAverage(1)
    again.restore(average.carried())
    assert again.count == 5 and again.losses == [2.0, 1.0, 3.0]
    for a, b in zip(again.mean or [], average.mean or []):
        assert torch.equal(a, b)


def _averaging_config(tmp_path, **train):
    """Counting sentences to learn, scored on counting backwards: the better the model learns to count, the worse
    its valid loss, so NT-AvSGD's trigger fires (valid at epoch 3 worse than at epoch 1)."""
    data = counting_corpus(tmp_path, 300, 50, 50)
    valid = (tmp_path / "valid.txt").read_text(encoding="utf-8").splitlines()
    (tmp_path / "valid.txt").write_text("\n".join(" ".join(line.split()[::-1]) for line in valid) + "\n",
                                        encoding="utf-8")
    return parse_config({
        "seed": 3, "data": data, "tokens": {"source": {"level": "word", "vocab_size": 50}},
        "model": {"type": "lm", "embedding_size": 16, "hidden_size": 16, "num_layers": 1, "dropout": 0.0},
        "train": {"epochs": 5, "streams": 4, "time_size": 8, "optimizer": "sgd", "schedule": "constant", "lr": 1.0,
                  "nt_asgd": 1, "precision": "fp32"} | train,
    })


def test_a_run_averages_after_the_trigger_keeps_the_mean_and_resumes_exactly(tmp_path, killed_at):
    config = _averaging_config(tmp_path)
    Trainer(config, tmp_path / "straight", progress=False).fit()
    log = RunDir(tmp_path / "straight").log()
    losses = [r["valid"]["loss"] for r in log]
    started = next(i for i, r in enumerate(log) if "averaged_steps" in r)  # the first epoch validated on a mean
    assert losses[started - 1] > min(losses[:started - 2])  # the epoch before it fired the trigger
    steps = [r["step"] for r in log]
    assert log[-1]["averaged_steps"] == steps[-1] - steps[started - 1] + 1  # every step since, and the start
    with killed_at(steps[-2] + 3):  # in the last epoch, resumed from a checkpoint that carries a mean of many
        Trainer(config, tmp_path / "killed", progress=False).fit()
    Trainer(config, tmp_path / "killed", resume=True, progress=False).fit()
    resumed = RunDir(tmp_path / "killed").log()
    assert [r["valid"]["loss"] for r in resumed] == losses
    assert [r.get("averaged_steps") for r in resumed] == [r.get("averaged_steps") for r in log]


def test_nt_asgd_needs_pytorchs_steps():
    with pytest.raises(ConfigError, match="train.nt_asgd .* needs train.engine torch"):
        parse_config({"model": {"type": "lm"}, "train": {"nt_asgd": 5, "engine": "numpy"}})


def test_a_run_without_averaging_carries_nothing_of_it():
    average = NTAverage(0)
    average.observe(nn.Linear(2, 2), 1.0)
    assert average.carried() == {}

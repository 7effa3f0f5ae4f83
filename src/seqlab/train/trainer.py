"""The training loop: batches of a model family, Adam with its schedule, validation, the best model, checkpoints.

``Trainer(config, run_dir).fit()`` prepares the run directory (``rundir.RunDir``), builds the family that
trains ``config.model`` (``family.build_family``: data, tokenizers, model) and trains it, with PyTorch or, for
``train.engine: numpy``, with the book's NumPy framework (``numpy_engine.NumpyEngine``). ``resume=True``
continues a killed run exactly where its last checkpoint left it: same weights, Adam moments, schedule,
RNG, epoch, position inside the epoch and counters.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from seqlab import precision
from seqlab.config import Config
from seqlab.rundir import RunDir
from seqlab.train.family import Family, build_family
from seqlab.train.numpy_engine import PREFIX as ENGINE_PREFIX
from seqlab.train.numpy_engine import NumpyEngine
from seqlab.train.optimizer import build_optimizer, optimizer_step
from seqlab.train.schedule import build_schedule, reduce_on_plateau

log = logging.getLogger("seqlab")

RESUMABLE_SECTIONS = ("seed", "data", "tokens", "model")  # may not change when a run is resumed


@dataclass
class Position:
    """Where training stands; saved in every checkpoint."""

    epoch: int = 1  # the epoch in progress
    batch: int = 0  # batches of it already done
    step: int = 0  # optimizer steps in total
    loss_sum: float = 0.0  # this epoch's summed training loss ...
    tokens: int = 0  # ... over this many target tokens
    seconds: float = 0.0  # this epoch's training time so far
    best: float | None = None  # best valid score (higher is better; loss is negated)
    best_loss: float | None = None  # the best epoch's valid loss, which breaks a tie of scores
    best_epoch: int = 0
    bad_epochs: int = 0  # epochs since the best, for early stopping


class Trainer:
    def __init__(
        self,
        config: Config,
        run_dir: str | Path,
        data_dir: str | Path | None = None,
        resume: bool = False,
        progress: bool | None = None,
    ) -> None:
        self.config = config
        self.run = RunDir(run_dir)
        self.progress = progress
        resolved = start_run(config, self.run, resume)
        self.family: Family = build_family(config, self.run, data_dir, resume)
        self.optimizer = build_optimizer(self.model, config.train)
        self.position = Position()
        self.scheduler = build_schedule(self.optimizer, config, config.train.epochs * len(self.family.batches(1)))
        self.engine = NumpyEngine(config, self.family) if config.train.engine == "numpy" else None
        if resume:
            state, carried = self.run.load_checkpoint(self.model, self.optimizer, self.scheduler)
            self.position = Position(**state)
            self.family.restore({k: v for k, v in carried.items() if not k.startswith(ENGINE_PREFIX)})
            if self.engine is not None:
                self.engine.restore(carried)
            self.run.truncate_log(self.position.step)
            log.info("resuming at epoch %d, batch %d, step %d", self.position.epoch, self.position.batch, self.position.step)
        else:
            self.run.save_config(config)
        log.info("%s; %s on %d threads", self.family.describe(), resolved, torch.get_num_threads())

    @property
    def model(self) -> torch.nn.Module:
        return self.family.model

    def train_step(self, indices: np.ndarray) -> tuple[float, int]:
        """One batch: its loss, backward, clipping, Adam and schedule steps. Returns the summed loss and tokens."""
        if self.engine is not None:  # the NumPy engine steps at the schedule's rate
            loss, count = self.engine.step(indices, float(self.optimizer.param_groups[0]["lr"]))  # the rate torch would take
            self.optimizer.step()  # no gradients, so no change: it keeps the scheduler's bookkeeping in order
            self.scheduler.step()
            return loss, count
        loss_sum, tokens = self.family.loss(indices)
        optimizer_step(self.model, self.optimizer, self.scheduler, loss_sum / tokens, self.config.train.clip_norm)
        return float(loss_sum.detach()), tokens

    def fit(self) -> dict[str, Any]:
        """Train for ``train.epochs`` (or until early stopping, or until the valid score reaches ``train.stop_at``);
        returns what the best model is (``model_info``)."""
        cfg = self.config.train
        pos = self.position
        while pos.epoch <= cfg.epochs and not self.target_reached():
            self.train_epoch()
            self.end_epoch()
            if cfg.early_stopping and pos.bad_epochs >= cfg.early_stopping:
                log.info("early stopping: no better valid %s for %d epochs", self.config.best_metric, pos.bad_epochs)
                break
        if self.target_reached():
            log.info("stopped: valid %s reached train.stop_at (%g)", self.config.best_metric, cfg.stop_at)
        return self.run.model_info()

    def target_reached(self) -> bool:
        """The best valid score is at ``train.stop_at`` or better (a loss at or below it)."""
        target, best = self.config.train.stop_at, self.position.best
        if target is None or best is None:
            return False
        return best >= (-target if self.config.best_metric == "loss" else target)

    def train_epoch(self) -> None:
        """The rest of the epoch in progress, from ``position.batch`` on."""
        pos, cfg = self.position, self.config.train
        batches = self.family.batches(pos.epoch)
        self.model.train()
        bar = tqdm(total=len(batches), initial=pos.batch, desc=f"epoch {pos.epoch}", unit="batch", leave=False,
                   disable=None if self.progress is None else not self.progress)  # None: only on a terminal
        for indices in batches[pos.batch :]:
            started = time.perf_counter()
            loss_sum, tokens = self.train_step(indices)
            pos.loss_sum += loss_sum
            pos.tokens += tokens
            pos.seconds += time.perf_counter() - started
            pos.batch += 1
            pos.step += 1
            bar.update()
            bar.set_postfix(loss=f"{pos.loss_sum / pos.tokens:.4f}", tok_s=f"{pos.tokens / pos.seconds:,.0f}")
            if cfg.save_every and pos.step % cfg.save_every == 0:
                self.save_checkpoint()
        bar.close()

    def end_epoch(self) -> None:
        """Validate, log, keep the best model, checkpoint; then move the position to the next epoch."""
        pos, cfg = self.position, self.config.train
        if self.engine is not None:
            self.engine.sync()  # the PyTorch twin validates and is saved
        valid = self.family.validate()
        record = {
            "epoch": pos.epoch,
            "step": pos.step,
            "train_loss": pos.loss_sum / max(pos.tokens, 1),
            "train_seconds": pos.seconds,
            f"train_{self.family.unit}_per_s": pos.tokens / max(pos.seconds, 1e-9),
            "lr": self.scheduler.get_last_lr()[0],
            "valid": valid,
        }
        metric = self.config.best_metric
        score = -valid["loss"] if metric == "loss" else valid[metric]
        if _better(score, valid["loss"], pos):
            pos.best, pos.best_loss, pos.best_epoch, pos.bad_epochs = score, valid["loss"], pos.epoch, 0
            self.run.save_model(self.model, {"epoch": pos.epoch, "step": pos.step, "valid": valid})
        else:
            pos.bad_epochs += 1
            if cfg.schedule == "plateau":
                log.info("valid %s not the best: learning rate now %g", metric,
                         reduce_on_plateau(self.scheduler, cfg.plateau_factor))
        record["best_epoch"] = pos.best_epoch
        self.run.append_log(record)
        log.info("epoch %d: train loss %.4f, %.1f s, %s %s/s | %s%s", pos.epoch, record["train_loss"], pos.seconds,
                 f"{pos.tokens / max(pos.seconds, 1e-9):,.0f}", self.family.unit, self.family.summary(valid),
                 " (best)" if pos.best_epoch == pos.epoch else "")
        pos.epoch, pos.batch, pos.loss_sum, pos.tokens, pos.seconds = pos.epoch + 1, 0, 0.0, 0, 0.0
        self.save_checkpoint()

    def save_checkpoint(self) -> None:
        carried = self.family.carried()
        if self.engine is not None:
            self.engine.sync()
            carried.update(self.engine.carried())
        self.run.save_checkpoint(self.model, self.optimizer, self.scheduler, asdict(self.position), carried)


def _better(score: float, loss: float, pos: Position) -> bool:
    """A higher valid score than the best so far, or the same score at a lower valid loss: a small valid split
    saturates (500 date questions all right from one epoch on), and the model that is also surer of its answers
    is the better one then."""
    if pos.best is None or score > pos.best:
        return True
    return score == pos.best and pos.best_loss is not None and loss < pos.best_loss


def start_run(config: Config, run: RunDir, resume: bool) -> str:
    """Before anything is built: the precision (a bad SEQLAB_PRECISION stops before the run directory exists),
    the run directory's state, threads and the seed. Returns the precision training runs in."""
    resolved = precision.resolve(config.train.precision)
    run.check_start(config, resume, RESUMABLE_SECTIONS)
    if resume:
        run.save_config(config)  # train/eval may have changed
    if config.train.threads:
        torch.set_num_threads(config.train.threads)
    torch.manual_seed(config.seed)
    return resolved

"""The training loop: batches of a model family, Adam with its schedule, validation, the best model, checkpoints.

``Trainer(config, run_dir).fit()`` prepares the run directory (``rundir.RunDir``), builds the family that
trains ``config.model`` (``family.build_family``: data, tokenizers, model) and trains it, with PyTorch or, for
``train.engine: numpy``, with the book's NumPy framework (``numpy_engine.NumpyEngine``). ``resume=True``
continues a killed run exactly where its last checkpoint left it: same weights, Adam moments, schedule,
RNG, epoch, position inside the epoch and counters; the log keeps the records of the epochs before that
position's (``RunDir.truncate_log``), the temporary files of killed saves are deleted, and a run killed before
its first checkpoint starts again from its beginning, as the run that was never killed.

One optimisation step takes ``train.accumulate`` batches in each of the ``World``'s processes (one, or those
``torchrun`` started: ``distributed``); rank 0 validates, and writes the run directory.

A step whose loss is NaN or infinite in any process (``train.nonfinite``) stops training with ``NonFiniteLoss``
before anything is saved (``stop``), or is dropped by every process alike (``skip``): its gradients are cleared
without an Adam step, while the schedule and the position move on as for any step (as fp16's gradient scaler
does with a step whose gradients overflow), so a resumed run stays exact; the epoch's log record counts them.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from seqlab import precision
from seqlab.config import Config, ConfigError
from seqlab.rundir import RunDir
from seqlab.runtime import PROBE_WARMUP, Runtime, measure_precision
from seqlab.train.averaged_sgd import PREFIX as AVERAGE_PREFIX
from seqlab.train.averaged_sgd import NTAverage
from seqlab.train.distributed import EpochSteps, World
from seqlab.train.family import Family, build_family
from seqlab.train.numpy_engine import PREFIX as ENGINE_PREFIX
from seqlab.train.numpy_engine import NumpyEngine
from seqlab.train.optimizer import apply_gradients, build_optimizer
from seqlab.train.schedule import build_schedule, reduce_on_plateau

log = logging.getLogger("seqlab")

RESUMABLE_SECTIONS = ("seed", "data", "tokens", "model")  # may not change when a run is resumed
RANK_RNG = "rank_rng."  # carried: the random state of ranks 1, 2 ... (rank 0's is the checkpoint's own)
CUDA_RNG = "cuda_rng."  # carried: each rank's CUDA random state, when it trains on a GPU


@dataclass
class Position:
    """Where training stands; saved in every checkpoint."""

    epoch: int = 1  # the epoch in progress
    batch: int = 0  # batches of it already done, in all processes together
    parts: int = 1  # batches per step: processes × train.accumulate
    step: int = 0  # optimizer steps in total
    loss_sum: float = 0.0  # this epoch's summed training loss ...
    tokens: int = 0  # ... over this many target tokens
    seconds: float = 0.0  # this epoch's training time so far
    best: float | None = None  # best valid score (higher is better; loss is negated)
    best_loss: float | None = None  # the best epoch's valid loss, which breaks a tie of scores
    best_epoch: int = 0
    bad_epochs: int = 0  # epochs since the best, for early stopping
    scaler: dict[str, Any] | None = None  # fp16's gradient scaler (its scale and growth count), on a GPU without bf16
    skipped: int = 0  # this epoch's steps dropped for a loss that was not finite (train.nonfinite: skip)
    precision: str = ""  # what the run trains in (auto's measured choice kept for resume); "" in older checkpoints
    looks: list[dict[str, Any]] = field(default_factory=list)  # this epoch's valid scores between its steps
    # (train.valid_every): step, train_seconds so far in the epoch, valid


class NonFiniteLoss(ValueError):
    """A step's loss was NaN or infinite under ``train.nonfinite: stop``; the message names the step."""


class Trainer:
    def __init__(
        self,
        config: Config,
        run_dir: str | Path,
        data_dir: str | Path | None = None,
        resume: bool = False,
        progress: bool | None = None,
        world: World | None = None,
    ) -> None:
        self.config = config
        self.run = RunDir(run_dir)
        self.progress = progress
        self.world = world or World()
        self.parts = self.world.size * config.train.accumulate
        if config.train.engine == "numpy" and self.world.size > 1:
            raise ConfigError("train.engine numpy trains in one process: run it without torchrun")
        self.runtime, resume = start_run(config, self.run, resume, self.world)
        self.device = self.runtime.device
        self.family: Family = self._build_family(data_dir, resume)
        self.model.to(self.device)
        self.step_loss = self.world.wrap(self.model, self.family.loss)  # DDP's replica under torchrun
        self.optimizer = build_optimizer(self.model, config.train)
        self.scaler = self.runtime.grad_scaler()
        self.position = Position(parts=self.parts)
        steps = len(EpochSteps(self.family.batches(1), self.parts, self.world))
        total = config.train.epochs * steps
        self.scheduler = build_schedule(self.optimizer, config, min(total, config.train.max_steps or total))
        self.engine = NumpyEngine(config, self.family) if config.train.engine == "numpy" else None
        self.average = NTAverage(config.train.nt_asgd)
        if resume:
            self._resume()
        else:
            if precision.probed(config.train.precision, self.device.type) and self.engine is None:
                self._use(self._measured_runtime())
            if self.world.is_main:
                self.run.save_config(config)
                self.run.truncate_log(self.position.epoch)  # started again: what it logged before its first checkpoint
        self.position.precision = self.runtime.precision
        where = f"on {self.device}" if self.device.type == "cuda" else f"on {torch.get_num_threads()} threads"
        log.info("%s; %s %s%s", self.family.describe(), self.runtime.named(), where,
                 f" in each of {self.world.size} processes" if self.world.size > 1 else "")

    def _use(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.family.use(runtime)

    def _measured_runtime(self) -> Runtime:
        """``auto`` where bf16 is native: the faster precision for this model here (``measure_precision``), timed
        by rank 0 on the first two batches of the first epoch (forward and backward, gradients dropped; the random
        state and a language model's carried state put back) and taken by every process."""
        measured = None
        if self.world.is_main:
            first = list(itertools.islice(self.family.batches(1)[0], PROBE_WARMUP))
            batches = itertools.cycle(first)  # the timed steps see warm shapes
            carried = self.family.carried()

            def step(runtime: Runtime) -> int:
                self.family.use(runtime)
                loss, units = self.family.loss(next(batches))
                loss.backward()
                self.model.zero_grad(set_to_none=True)
                return units

            train = self.config.train
            key = {"model": self.config.model.model_dump(mode="json"), "batch_tokens": train.batch_tokens,
                   "batch_sentences": train.batch_sentences, "kind": type(self.family).__name__}
            with torch.random.fork_rng(devices=[]):
                measured = measure_precision(step, self.runtime, key, self.family.unit.removesuffix("s"))
            self.family.restore(carried)
        precision_name, reason = self.world.from_main(None if measured is None else (measured.precision,
                                                                                     measured.reason))
        return replace(self.runtime, precision=precision_name, reason=reason)

    def _build_family(self, data_dir: str | Path | None, resume: bool) -> Family:
        """Rank 0 builds the family first (it learns and saves the tokenizers); the others then read them back."""
        share = self.world.positions(self.config.train.accumulate)  # a language model's row groups this rank trains
        build = functools.partial(build_family, self.config, self.run, data_dir, parts=self.parts, share=share,
                                  runtime=self.runtime)
        family = build(resume=resume) if self.world.is_main else None
        self.world.barrier()
        return family or build(resume=True)

    def _resume(self) -> None:
        state, carried = self.run.load_checkpoint(self.model, self.optimizer, self.scheduler)
        pos = self.position = Position(**state)
        if pos.parts != self.parts:
            log.warning("the run took %d batches a step and now takes %d (processes × train.accumulate): it goes on, "
                        "but not as it would have", pos.parts, self.parts)
            pos.batch, pos.parts = pos.batch - pos.batch % self.parts, self.parts
        if not self.world.is_main:
            pos.loss_sum, pos.tokens = 0.0, 0  # the checkpoint's sums are all processes'; rank 0 carries them on
        if f"{RANK_RNG}{self.world.rank}" in carried:
            torch.set_rng_state(carried[f"{RANK_RNG}{self.world.rank}"])
        if f"{CUDA_RNG}{self.world.rank}" in carried and self.device.type == "cuda":
            torch.cuda.set_rng_state(carried[f"{CUDA_RNG}{self.world.rank}"], self.device)
        if pos.precision and precision.probed(self.config.train.precision, self.device.type):
            # auto measured when the run started: the same choice (on a machine of another kind, its own flags')
            self._use(replace(self.runtime, precision=pos.precision, reason="auto: as the run chose when it started"))
        if pos.scaler is not None:
            self.scaler.load_state_dict(pos.scaler)
        ours = (ENGINE_PREFIX, RANK_RNG, CUDA_RNG, AVERAGE_PREFIX)
        self.family.restore({k: v for k, v in carried.items() if not k.startswith(ours)})
        self.average.restore({k: v for k, v in carried.items() if k.startswith(AVERAGE_PREFIX)})
        if self.engine is not None:
            self.engine.restore(carried)
        if self.world.is_main:
            self.run.truncate_log(pos.epoch)  # an epoch logged but not yet checkpointed as ended is ended again
        log.info("resuming at epoch %d, batch %d, step %d", pos.epoch, pos.batch, pos.step)

    @property
    def model(self) -> torch.nn.Module:
        return self.family.model

    def train_step(self, batches: list[np.ndarray]) -> tuple[float, int]:
        """This process's batches of one step: their losses, backward (the gradient of their mean loss, averaged
        over the processes by DDP in the last backward), clipping, Adam and schedule steps. Returns the summed
        loss and tokens (none for a step skipped for its loss, ``train.nonfinite``)."""
        if self.engine is not None:  # the NumPy engine steps at the schedule's rate (one batch, one process)
            loss, count = self.engine.step(batches[0], float(self.optimizer.param_groups[0]["lr"]))  # torch's rate
            self._check_loss(loss)  # stop only (skip is torch's): nothing is saved after the step
            self.optimizer.step()  # no gradients, so no change: it keeps the scheduler's bookkeeping in order
            self.scheduler.step()
            return loss, count
        total, count = 0.0, 0
        for i, indices in enumerate(batches):
            last = i == len(batches) - 1
            with nullcontext() if last or self.world.size == 1 else self.step_loss.no_sync():  # type: ignore[operator]
                loss_sum, tokens = self.step_loss(indices)
                self.scaler.scale(loss_sum / tokens / len(batches)).backward()
            total += float(loss_sum.detach())
            count += tokens
        if not self._check_loss(total):
            self.optimizer.zero_grad(set_to_none=True)  # no Adam step; the schedule moves on with the position
            self.scheduler.step()
            return 0.0, 0
        apply_gradients(self.model, self.optimizer, self.scheduler, self.config.train.clip_norm,
                        self.scaler if self.scaler.is_enabled() else None)
        self.average.update(self.model)
        return total, count

    def _check_loss(self, loss: float) -> bool:
        """Whether the step whose summed loss in this process is ``loss`` is finite in every process (the
        processes decide together); if it is not, ``train.nonfinite: stop`` raises ``NonFiniteLoss`` and ``skip``
        counts the step and returns False."""
        total = self.world.sum([loss])[0]
        if math.isfinite(total):
            return True
        pos = self.position
        where = f"step {pos.step + 1} (epoch {pos.epoch})"
        if self.config.train.nonfinite == "stop":
            raise NonFiniteLoss(f"training stopped at {where}: its loss is {total}; nothing was saved after it, "
                                f"{self.run.path} keeps the last good checkpoint (train.nonfinite: skip would drop "
                                "such steps)")
        pos.skipped += 1
        log.warning("%s: loss %s, its update skipped (train.nonfinite: skip)", where, total)
        return False

    def fit(self) -> dict[str, Any]:
        """Train for ``train.epochs`` (or until early stopping, or until the valid score reaches ``train.stop_at``);
        returns what the best model is (``model_info``)."""
        cfg = self.config.train
        pos = self.position
        while pos.epoch <= cfg.epochs and not self.target_reached() and not self.steps_taken():
            self.train_epoch()
            self.end_epoch()
            if cfg.early_stopping and pos.bad_epochs >= cfg.early_stopping:
                log.info("early stopping: no better valid %s for %d epochs", self.config.best_metric, pos.bad_epochs)
                break
        if self.target_reached():
            log.info("stopped: valid %s reached train.stop_at (%g)", self.config.best_metric, cfg.stop_at)
        elif self.steps_taken():
            log.info("stopped: %d steps taken (train.max_steps)", pos.step)
        return self.run.model_info()

    def steps_taken(self) -> bool:
        """``train.max_steps`` steps are taken."""
        return self.config.train.max_steps is not None and self.position.step >= self.config.train.max_steps

    def target_reached(self) -> bool:
        """The best valid score is at ``train.stop_at`` or better (a loss at or below it)."""
        target, best = self.config.train.stop_at, self.position.best
        if target is None or best is None:
            return False
        return best >= (-target if self.config.best_metric == "loss" else target)

    def train_epoch(self) -> None:
        """The rest of the epoch in progress, from ``position.batch`` on."""
        pos, cfg = self.position, self.config.train
        steps = EpochSteps(self.family.batches(pos.epoch), self.parts, self.world)
        self.model.train()
        done = pos.batch // self.parts
        hidden = None if self.progress is None else not self.progress  # None: shown only on a terminal
        bar = tqdm(total=len(steps), initial=done, desc=f"epoch {pos.epoch}", unit="step", leave=False,
                   disable=hidden if self.world.is_main else True)
        for group in steps.groups(done):
            if self.steps_taken():  # the epoch ends here
                break
            started = time.perf_counter()
            loss_sum, tokens = self.train_step(group)
            pos.loss_sum += loss_sum
            pos.tokens += tokens
            pos.seconds += time.perf_counter() - started
            pos.batch += self.parts
            pos.step += 1
            bar.update()
            bar.set_postfix(loss=f"{pos.loss_sum / max(pos.tokens, 1):.4f}", tok_s=f"{pos.tokens / pos.seconds:,.0f}")
            if cfg.valid_every and pos.step % cfg.valid_every == 0 and pos.batch // self.parts < len(steps):
                self.look()  # not at the epoch's last step: its end validates
            if cfg.save_every and pos.step % cfg.save_every == 0:
                self.save_checkpoint()
        bar.close()

    def look(self) -> None:
        """``train.valid_every``: the valid split scored between two steps (the mean weights under NT-AvSGD, as at an
        epoch's end), kept for the epoch's log record (``looks``) and nothing else: no best model, no schedule, no
        early stopping. It draws no random numbers and its time is not training time, so the run trains as it
        would without it."""
        pos = self.position
        with self.average.applied(self.model):
            valid = self._valid()
        self.model.train()
        pos.looks.append({"step": pos.step, "train_seconds": pos.seconds, "valid": valid})
        if self.world.is_main:
            log.info("epoch %d, step %d: %.1f s | %s", pos.epoch, pos.step, pos.seconds, self.family.summary(valid))

    def _valid(self) -> dict[str, Any]:
        """The valid scores, computed by rank 0 and handed to every process: one decision for all."""
        return self.world.from_main(self.family.validate() if self.world.is_main else None)

    def end_epoch(self) -> None:
        """Validate, log, keep the best model, checkpoint; then move the position to the next epoch."""
        pos, cfg = self.position, self.config.train
        if self.engine is not None:
            self.engine.sync()  # the PyTorch twin validates and is saved
        with self.average.applied(self.model):  # NT-AvSGD: the mean is validated and kept, once averaging started
            record = self._validate_and_keep()
        if self.average.observe(self.model, record["valid"]["loss"]):
            log.info("valid loss %.4f is worse than the best of the epochs before the last %d: averaging the weights "
                     "from now on (train.nt_asgd)", record["valid"]["loss"], cfg.nt_asgd)
        pos.epoch, pos.batch, pos.loss_sum, pos.tokens, pos.seconds, pos.skipped = pos.epoch + 1, 0, 0.0, 0, 0.0, 0
        pos.looks = []
        self.save_checkpoint()

    def _validate_and_keep(self) -> dict[str, Any]:
        """The epoch's valid scores, its log record, the best model and the kept epochs (``end_epoch``)."""
        pos, cfg = self.position, self.config.train
        valid = self._valid()
        loss_sum, tokens = self.world.sum([pos.loss_sum, pos.tokens])
        record: dict[str, Any] = {
            "epoch": pos.epoch,
            "step": pos.step,
            "train_loss": loss_sum / max(tokens, 1),
            "train_seconds": pos.seconds,
            f"train_{self.family.unit}_per_s": tokens / max(pos.seconds, 1e-9),
            "lr": self.scheduler.get_last_lr()[0],
            "valid": valid,
        }
        metric = self.config.best_metric
        score = -valid["loss"] if metric == "loss" else valid[metric]
        if _better(score, valid["loss"], pos):
            pos.best, pos.best_loss, pos.best_epoch, pos.bad_epochs = score, valid["loss"], pos.epoch, 0
            if self.world.is_main:
                self.run.save_model(self.model, {"epoch": pos.epoch, "step": pos.step, "valid": valid,
                                                 "precision": self.runtime.precision})
        else:
            pos.bad_epochs += 1
            if cfg.schedule == "plateau":
                log.info("valid %s not the best: learning rate now %g", metric,
                         reduce_on_plateau(self.scheduler, cfg.plateau_factor))
        record["best_epoch"] = pos.best_epoch
        if self.average.count:
            record["averaged_steps"] = self.average.count  # NT-AvSGD: validated (and kept) is their mean
        if cfg.nonfinite == "skip":
            record["skipped"] = pos.skipped
        if pos.looks:
            record["looks"] = list(pos.looks)
        if self.world.is_main:
            self.run.append_log(record)
            log.info("epoch %d: train loss %.4f, %.1f s, %s %s/s | %s%s", pos.epoch, record["train_loss"],
                     pos.seconds, f"{record[f'train_{self.family.unit}_per_s']:,.0f}", self.family.unit,
                     self.family.summary(valid), " (best)" if pos.best_epoch == pos.epoch else "")
        if cfg.keep_checkpoints and self.world.is_main:  # before the checkpoint: a resumed epoch writes it again
            self.run.keep_epoch(self.model, {"epoch": pos.epoch, "step": pos.step, "valid": valid},
                                cfg.keep_checkpoints)
        return record

    def save_checkpoint(self) -> None:
        """Every process takes part (what they carry is gathered); rank 0 writes."""
        carried = self.world.sum_tensors(self.family.carried())
        if self.engine is not None:
            self.engine.sync()
            carried.update(self.engine.carried())
        rngs = self.world.gather(torch.get_rng_state())
        carried.update({f"{RANK_RNG}{rank}": rng for rank, rng in enumerate(rngs) if rank > 0})
        carried.update(self.average.carried())
        if self.device.type == "cuda":
            cuda_rngs = self.world.gather(torch.cuda.get_rng_state(self.device))
            carried.update({f"{CUDA_RNG}{rank}": rng for rank, rng in enumerate(cuda_rngs)})
        self.position.scaler = self.scaler.state_dict() if self.scaler.is_enabled() else None
        loss_sum, tokens = self.world.sum([self.position.loss_sum, self.position.tokens])
        state = asdict(self.position) | {"loss_sum": loss_sum, "tokens": int(tokens)}
        if self.world.is_main:
            self.run.save_checkpoint(self.model, self.optimizer, self.scheduler, state, carried)


def _better(score: float, loss: float, pos: Position) -> bool:
    """A higher valid score than the best so far, or the same score at a lower valid loss: a small valid split
    saturates (500 date questions all right from one epoch on), and the model that is also surer of its answers
    is the better one then."""
    if pos.best is None or score > pos.best:
        return True
    return score == pos.best and pos.best_loss is not None and loss < pos.best_loss


def start_run(config: Config, run: RunDir, resume: bool, world: World) -> tuple[Runtime, bool]:
    """Before anything is built: the runtime, the device and the precision there (a CUDA device that is not there,
    or a bad SEQLAB_PRECISION, stops before the run directory exists; the NumPy engine's twin computes on the
    CPU), the run directory's state (rank 0 checks it and, on resume, deletes the temporary files of killed saves;
    the others wait), threads and the seed (each process its own dropout masks: seed + rank). Returns the runtime
    and whether it resumes from a checkpoint: a run resumed before its first checkpoint starts again from its
    beginning."""
    runtime = Runtime.for_training(config.train.device, config.train.precision, config.train.engine == "numpy")
    checkpointed = False
    if world.is_main:
        checkpointed = run.check_start(config, resume, RESUMABLE_SECTIONS)
        if resume and checkpointed:
            run.save_config(config)  # train/eval may have changed
    resume = bool(world.from_main(resume and checkpointed))  # a collective call: the others wait for rank 0
    if config.train.threads:
        torch.set_num_threads(config.train.threads)
    torch.manual_seed(config.seed + world.rank)
    return runtime, resume

"""The training loop: teacher forcing, Adam with the warm-up schedule, validation, checkpoints.

``Trainer(config, run_dir).fit()`` reads the data, learns the tokenizers,
builds the model and trains it, writing the run directory described in
``checkpoint.py``. ``resume=True`` continues a killed run exactly where its
last checkpoint left it: same weights, Adam moments, schedule, RNG, epoch,
position inside the epoch and counters.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from seqlab import precision
from seqlab.config import Config, ConfigError, TokensConfig
from seqlab.data import Pair, load_splits, resolve_data_dir
from seqlab.data.batching import Batch, collate, length_batches, random_batches
from seqlab.evaluate import EncodedSplit, evaluate
from seqlab.files import atomic_write
from seqlab.model import Seq2seq, build_model, num_parameters
from seqlab.tokenizer import Tokenizer
from seqlab.train import checkpoint
from seqlab.train.loss import token_nll_sum
from seqlab.train.schedule import cosine_schedule, transformer_schedule
from seqlab.translator import Translator

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
        self.run_dir = Path(run_dir)
        self.progress = progress
        resolved = precision.resolve(config.train.precision)  # a bad SEQLAB_PRECISION stops before the run dir exists
        _check_run_dir(self.run_dir, config, resume)
        if config.train.threads:
            torch.set_num_threads(config.train.threads)
        torch.manual_seed(config.seed)

        splits = load_splits(config.data, resolve_data_dir(data_dir))
        source, target = self._tokenizers(splits["train"], resume)
        model = build_model(config.model, source.vocab_size, target.vocab_size)
        self.translator = Translator(model, source, target, config)
        self.train_set = EncodedSplit.build(self.translator, splits["train"], "train")
        self.valid_set = EncodedSplit.build(self.translator, splits["valid"], "valid")
        # fused: one kernel for all parameters (about 6× faster than the per-parameter loop on CPU)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9, fused=True)
        self.position = Position()
        self.scheduler = _schedule(self.optimizer, config, config.train.epochs * len(self._epoch_batches()))
        if resume:
            saved = checkpoint.load_checkpoint(self.run_dir, model, self.optimizer, self.scheduler)
            self.position = Position(**saved)
            _truncate_log(self.run_dir / checkpoint.LOG, self.position.step)
            log.info("resuming at epoch %d, batch %d, step %d", self.position.epoch, self.position.batch, self.position.step)
        else:
            checkpoint.save_run_config(self.run_dir, config)
        log.info(
            "%d train / %d valid pairs; vocab %d → %d; %s parameters; %s on %d threads",
            len(self.train_set.src), len(self.valid_set.src), source.vocab_size, target.vocab_size,
            f"{num_parameters(model):,}", resolved, torch.get_num_threads(),
        )

    @property
    def model(self) -> Seq2seq:
        return self.translator.model

    def _tokenizers(self, train_pairs: list[Pair], resume: bool) -> tuple[Tokenizer, Tokenizer]:
        paths = self.run_dir / checkpoint.SOURCE_TOKENIZER, self.run_dir / checkpoint.TARGET_TOKENIZER
        if resume:
            source, target = (Tokenizer.from_json(p.read_text(encoding="utf-8")) for p in paths)
            return source, target
        source, target = learn_tokenizers(train_pairs, self.config.tokens)
        for path, tokenizer in zip(paths, (source, target)):
            atomic_write(path, tokenizer.to_json())
        return source, target

    # --- one step ---------------------------------------------------------------

    def train_step(self, batch: Batch) -> float:
        """Forward (teacher forcing), masked loss, backward, clip, Adam step, schedule step. Returns the summed loss."""
        with self.translator.autocast():
            logits = self.model(batch.src, batch.trg_in)  # (batch, trg_len, vocab)
        loss_sum = token_nll_sum(logits, batch.trg_out, self.config.train.label_smoothing)
        (loss_sum / batch.num_target_tokens).backward()
        if self.config.train.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.train.clip_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss_sum.detach())

    # --- the loop -----------------------------------------------------------------

    def fit(self) -> dict[str, Any]:
        """Train for ``train.epochs`` (or until early stopping); returns the best epoch's valid metrics."""
        cfg = self.config.train
        pos = self.position
        while pos.epoch <= cfg.epochs:
            self._train_epoch()
            self._end_epoch()
            if cfg.early_stopping and pos.bad_epochs >= cfg.early_stopping:
                log.info("early stopping: no better valid %s for %d epochs", cfg.best_metric, pos.bad_epochs)
                break
        return checkpoint.read_model_info(self.run_dir)

    def _train_epoch(self) -> None:
        pos, cfg = self.position, self.config.train
        src, trg = self.train_set.src, self.train_set.trg
        batches = self._epoch_batches()
        self.model.train()
        bar = tqdm(total=len(batches), initial=pos.batch, desc=f"epoch {pos.epoch}", unit="batch", leave=False,
                   disable=None if self.progress is None else not self.progress)  # None: only on a terminal
        for indices in batches[pos.batch :]:
            started = time.perf_counter()
            batch = collate([src[i] for i in indices], [trg[i] for i in indices])
            pos.loss_sum += self.train_step(batch)
            pos.tokens += batch.num_target_tokens
            pos.seconds += time.perf_counter() - started
            pos.batch += 1
            pos.step += 1
            bar.update()
            bar.set_postfix(loss=f"{pos.loss_sum / pos.tokens:.4f}", tok_s=f"{pos.tokens / pos.seconds:,.0f}")
            if cfg.save_every and pos.step % cfg.save_every == 0:
                self._save_checkpoint()
        bar.close()

    def _end_epoch(self) -> None:
        """Validate, log, keep the best model, checkpoint; then move the position to the next epoch."""
        pos, cfg = self.position, self.config.train
        valid = evaluate(self.translator, self.valid_set, cfg.batch_tokens, self.config.eval.valid_limit)
        record = {
            "epoch": pos.epoch,
            "step": pos.step,
            "train_loss": pos.loss_sum / max(pos.tokens, 1),
            "train_seconds": pos.seconds,
            "train_tokens_per_s": pos.tokens / max(pos.seconds, 1e-9),
            "lr": self.scheduler.get_last_lr()[0],
            "valid": valid,
        }
        score = -valid["loss"] if cfg.best_metric == "loss" else valid[cfg.best_metric]
        if pos.best is None or score > pos.best:
            pos.best, pos.best_epoch, pos.bad_epochs = score, pos.epoch, 0
            checkpoint.save_model(self.run_dir, self.model, {"epoch": pos.epoch, "step": pos.step, "valid": valid})
        else:
            pos.bad_epochs += 1
        record["best_epoch"] = pos.best_epoch
        with open(self.run_dir / checkpoint.LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        log.info(
            "epoch %d: train loss %.4f, %.1f s, %s target tok/s | valid loss %.4f, ppl %.3f, exact %.2f%%, BLEU %.2f%s",
            pos.epoch, record["train_loss"], pos.seconds, f"{record['train_tokens_per_s']:,.0f}", valid["loss"],
            valid["perplexity"], valid["exact_match"], valid["bleu"], " (best)" if pos.best_epoch == pos.epoch else "",
        )
        pos.epoch, pos.batch, pos.loss_sum, pos.tokens, pos.seconds = pos.epoch + 1, 0, 0.0, 0, 0.0
        self._save_checkpoint()

    def _save_checkpoint(self) -> None:
        checkpoint.save_checkpoint(self.run_dir, self.model, self.optimizer, self.scheduler, asdict(self.position))

    def _epoch_batches(self) -> list[np.ndarray]:
        """This epoch's batches (index arrays into the training set), in training order."""
        cfg, src, trg = self.config.train, self.train_set.src, self.train_set.trg
        seed = self.config.seed * 1_000_003 + self.position.epoch
        if cfg.batch_sentences:
            return random_batches(len(src), cfg.batch_sentences, seed)
        return length_batches([len(s) for s in src], [len(t) for t in trg], cfg.batch_tokens, seed)


def learn_tokenizers(train_pairs: list[Pair], cfg: TokensConfig) -> tuple[Tokenizer, Tokenizer]:
    """The source and target tokenizers learnt from the training pairs (one shared one if ``cfg.shared``)."""
    sources, targets = [s for s, _ in train_pairs], [t for _, t in train_pairs]
    if cfg.shared:
        shared = Tokenizer.train(sources + targets, cfg.source)
        return shared, shared
    return Tokenizer.train(sources, cfg.source), Tokenizer.train(targets, cfg.target)


def _schedule(optimizer: torch.optim.Optimizer, config: Config, total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """The seed's warm-up schedule (Transformers), ``train.lr`` throughout (the book's RNNs: Adam 1e-3), or cosine decay.

    ``total_steps`` (epochs × the first epoch's batches) is where the cosine reaches 0.
    """
    cfg = config.train
    if cfg.schedule == "transformer":
        return transformer_schedule(optimizer, config.model.d_model, cfg.warmup, cfg.lr_scale)
    if cfg.schedule == "cosine":
        return cosine_schedule(optimizer, cfg.lr, total_steps)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: cfg.lr)


def _check_run_dir(run_dir: Path, config: Config, resume: bool) -> None:
    """Refuse to overwrite a run; on resume, refuse a config that would change the data or the model."""
    has_run = (run_dir / checkpoint.CONFIG).exists()
    if not resume:
        if has_run:
            raise ConfigError(f"{run_dir} already holds a run: pass --resume to continue it, or choose another --out")
        return
    if not (run_dir / checkpoint.CHECKPOINT).exists():
        raise ConfigError(f"{run_dir}: nothing to resume (no {checkpoint.CHECKPOINT})")
    saved = checkpoint.load_run_config(run_dir).model_dump(mode="json")
    now = config.model_dump(mode="json")
    changed = [key for section in RESUMABLE_SECTIONS for key in _diff(saved[section], now[section], section)]
    if changed:
        raise ConfigError(f"cannot resume {run_dir} with a different {', '.join(changed)} (only train/eval may change)")
    checkpoint.save_run_config(run_dir, config)


def _diff(a: Any, b: Any, prefix: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [k for key in sorted(a.keys() | b.keys()) for k in _diff(a.get(key), b.get(key), f"{prefix}.{key}")]
    return [] if a == b else [prefix]


def _truncate_log(path: Path, step: int) -> None:
    """Drop log lines written after the checkpoint we resume from."""
    if path.exists():
        kept = [line for line in path.read_text(encoding="utf-8").splitlines() if json.loads(line)["step"] <= step]
        atomic_write(path, "".join(line + "\n" for line in kept))

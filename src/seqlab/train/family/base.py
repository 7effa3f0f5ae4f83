"""What every family is to the training loop (``Family``), and how an epoch's batches are drawn."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence, Sized
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import numpy as np
import torch
from torch import nn

from seqlab.config import Config
from seqlab.data.batching import BatchStream, InMemory, Lengths, random_batches, windowed_batches
from seqlab.data.corpus import DataError
from seqlab.data.prepared import Prepared, Rows
from seqlab.predictors.base import NgramModel, saved_ngrams
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.tokenizer import Tokenizer

log = logging.getLogger("seqlab")
N = TypeVar("N", bound=NgramModel)


class Family(Protocol):
    unit: str  # what a batch's loss is summed over: "tokens" (target tokens) or "texts" (a classifier's inputs)

    @property
    def model(self) -> nn.Module:
        """The model being trained."""

    def use(self, runtime: Runtime) -> None:
        """Compute in ``runtime`` from now on (what ``auto`` measured, or what a resumed run recorded)."""

    def describe(self) -> str:
        """The data and model sizes, for the line training starts with."""

    def batches(self, epoch: int) -> list[BatchStream]:
        """That epoch's batches (index arrays into the training set) in training order, fixed by the seed: one
        stream, or one for each of a step's parts (``windowed_batches``)."""

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        """The summed training loss of one batch and the number of ``unit`` it is summed over."""

    def validate(self) -> dict[str, Any]:
        """The valid metrics; 'loss' among them."""

    @classmethod
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool, parts: int = 1,
              share: range | None = None, runtime: Runtime | None = None) -> Family:
        """Read the data, learn the tokenizers (or read them back from ``run`` on resume), build the model.
        ``parts``: batches per step (processes × ``train.accumulate``), which cut a language model's rows;
        ``share``: which of them this process trains; ``runtime``: where the model trains, in what precision."""

    @staticmethod
    def summary(valid: dict[str, Any]) -> str:
        """The valid metrics for the line that ends an epoch (and the line ``seqlab train`` ends with)."""

    def carried(self) -> dict[str, torch.Tensor]:
        """What a batch hands to the next beyond the weights (a language model's state), for the checkpoint."""

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        """Take back what ``carried`` gave, on resume."""


def epoch_batches(config: Config, epoch: int, src: Sequence[Sized] | Lengths, trg: Sequence[Sized] | Lengths | None = None,
                  parts: int = 1) -> list[BatchStream]:
    """An epoch's batches of the training inputs ``src`` (and targets ``trg``, if any), rows in memory or a
    prepared split's ``Rows``: ``train.batch_sentences`` at a time in random order, or grouped by length under
    ``train.batch_tokens`` (inputs plus targets), ``train.batch_window`` chunks at a time, as one stream or one for
    each of a step's ``parts`` (``windowed_batches``); the order fixed by (seed, epoch)."""
    cfg, seed, inputs = config.train, config.seed * 1_000_003 + epoch, _lengths(src)
    if cfg.batch_sentences:
        return [random_batches(sum(inputs.chunk_rows()), cfg.batch_sentences, seed)]
    return windowed_batches(inputs, None if trg is None else _lengths(trg), cfg.batch_window, cfg.batch_tokens, seed,
                            parts)


def _lengths(rows: Sequence[Sized] | Lengths) -> Lengths:
    """A prepared column's lengths as it reads them; a list's counted."""
    return rows if isinstance(rows, Rows) else InMemory.of(cast(Sequence[Sized], rows))


def prepared_tokenizers(prepared: Prepared, run: RunDir, resume: bool) -> tuple[Tokenizer, Tokenizer]:
    """A prepared directory's source and target tokenizers (its one tokenizer twice where the kind has one), saved
    into a new run as a learnt pair is, or checked to be those of the run resumed."""
    names = ("source", "target") if "target" in prepared.manifest["tokenizers"] else ("source", "source")
    source, target = (Tokenizer.from_json(prepared.tokenizer_json(name)) for name in names)
    if not resume:
        run.save_tokenizers(source, target)
    elif [t.to_json() for t in run.tokenizers()] != [source.to_json(), target.to_json()]:
        raise DataError(f"{prepared.path}: its tokenizers are not the run's; resume from the directory it trained on")
    return source, target


def ngrams_beside(run: RunDir, resume: bool, model: type[N], cfg: Any, fit: Callable[[], N]) -> N:
    """``model.ngrams``' n-gram model (``cfg``) beside a family's network: ``fit()`` and saved before the first
    epoch, so that every validation sees it; on resume, the one saved."""
    if resume:
        return saved_ngrams(run, model, cfg)
    fitted = fit()
    run.save_ngrams(*fitted.state())
    log.info("%s, fitted in %.1f s", fitted.describe(), fitted.fit_seconds)
    return fitted

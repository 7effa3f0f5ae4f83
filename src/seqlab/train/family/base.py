"""What every family is to the training loop (``Family``), and how an epoch's batches are drawn."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from seqlab.config import Config
from seqlab.data.batching import random_batches, windowed_batches
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime


class Family(Protocol):
    unit: str  # what a batch's loss is summed over: "tokens" (target tokens) or "texts" (a classifier's inputs)

    @property
    def model(self) -> nn.Module:
        """The model being trained."""

    def use(self, runtime: Runtime) -> None:
        """Compute in ``runtime`` from now on (what ``auto`` measured, or what a resumed run recorded)."""

    def describe(self) -> str:
        """The data and model sizes, for the line training starts with."""

    def batches(self, epoch: int) -> list[np.ndarray]:
        """That epoch's batches (index arrays into the training set), in training order; fixed by the seed."""

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


def epoch_batches(config: Config, epoch: int, src_lengths: Sequence[int] | np.ndarray,
                  trg_lengths: Sequence[int] | np.ndarray | None = None,
                  chunks: Sequence[int] | None = None) -> list[np.ndarray]:
    """An epoch's batches of the training inputs: ``train.batch_sentences`` at a time in random order, or grouped
    by length under ``train.batch_tokens`` (inputs plus targets, if any), ``train.batch_window`` of the ``chunks``
    at a time (a prepared split's; an in-memory one is one chunk); the order fixed by (seed, epoch)."""
    cfg, seed = config.train, config.seed * 1_000_003 + epoch
    if cfg.batch_sentences:
        return random_batches(len(src_lengths), cfg.batch_sentences, seed)
    return windowed_batches(src_lengths, [0] * len(src_lengths) if trg_lengths is None else trg_lengths,
                            [len(src_lengths)] if chunks is None else chunks, cfg.batch_window, cfg.batch_tokens, seed)

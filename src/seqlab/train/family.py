"""A model family as the training loop sees it: its model, its batches, how a batch becomes a loss, and what
validation reports. ``Trainer`` runs any ``Family``; ``Seq2seq`` is the encoder-decoder one (Transformer and
RNN seq2seq: teacher forcing on source/target pairs, validated by ``evaluate``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from seqlab.config import Config
from seqlab.data import load_splits, resolve_data_dir
from seqlab.data.batching import collate, length_batches, random_batches
from seqlab.evaluate import EncodedSplit, evaluate
from seqlab.loss import token_nll_sum
from seqlab.model import build_model, num_parameters
from seqlab.rundir import RunDir
from seqlab.tokenizer import learn_tokenizers
from seqlab.translator import Translator


class Family(Protocol):
    @property
    def model(self) -> nn.Module:
        """The model being trained."""

    def describe(self) -> str:
        """The data and model sizes, for the line training starts with."""

    def batches(self, epoch: int) -> list[np.ndarray]:
        """That epoch's batches (index arrays into the training set), in training order; fixed by the seed."""

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        """The summed training loss of one batch and the number of tokens it is summed over."""

    def validate(self) -> dict[str, Any]:
        """The valid metrics; 'loss' among them."""

    def summary(self, valid: dict[str, Any]) -> str:
        """The valid metrics for the line that ends an epoch."""


class Seq2seq:
    """Source/target pairs, teacher forcing (seed 000's ``train_step``), validation by ``evaluate``."""

    def __init__(self, config: Config, translator: Translator, train_set: EncodedSplit, valid_set: EncodedSplit) -> None:
        self.config = config
        self.translator = translator
        self.model = translator.model
        self.train_set = train_set
        self.valid_set = valid_set

    @classmethod
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool) -> Seq2seq:
        """Read the splits, learn the tokenizers (or read them back on resume), build the model, encode the data."""
        splits = load_splits(config.data, resolve_data_dir(data_dir))
        if resume:
            source, target = run.tokenizers()
        else:
            source, target = learn_tokenizers(splits["train"], config.tokens)
            run.save_tokenizers(source, target)
        translator = Translator(build_model(config.model, source.vocab_size, target.vocab_size), source, target, config)
        return cls(config, translator, EncodedSplit.build(translator, splits["train"], "train"),
                   EncodedSplit.build(translator, splits["valid"], "valid"))

    def describe(self) -> str:
        t = self.translator
        return (f"{len(self.train_set.src)} train / {len(self.valid_set.src)} valid pairs; vocab {t.source.vocab_size} "
                f"→ {t.target.vocab_size}; {num_parameters(self.model):,} parameters")

    def batches(self, epoch: int) -> list[np.ndarray]:
        cfg, src, trg = self.config.train, self.train_set.src, self.train_set.trg
        seed = self.config.seed * 1_000_003 + epoch
        if cfg.batch_sentences:
            return random_batches(len(src), cfg.batch_sentences, seed)
        return length_batches([len(s) for s in src], [len(t) for t in trg], cfg.batch_tokens, seed)

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        batch = collate([self.train_set.src[i] for i in indices], [self.train_set.trg[i] for i in indices])
        with self.translator.autocast():
            logits = self.model(batch.src, batch.trg_in)  # (batch, trg_len, vocab)
        return token_nll_sum(logits, batch.trg_out, self.config.train.label_smoothing), batch.num_target_tokens

    def validate(self) -> dict[str, Any]:
        return evaluate(self.translator, self.valid_set, self.config.train.batch_tokens, self.config.eval.valid_limit)

    def summary(self, valid: dict[str, Any]) -> str:
        return (f"valid loss {valid['loss']:.4f}, ppl {valid['perplexity']:.3f}, exact {valid['exact_match']:.2f}%, "
                f"BLEU {valid['bleu']:.2f}")


def build_family(config: Config, run: RunDir, data_dir: str | Path | None, resume: bool) -> Family:
    """The family that trains ``config.model``: every model type seqlab has today is a seq2seq model."""
    return Seq2seq.build(config, run, data_dir, resume)

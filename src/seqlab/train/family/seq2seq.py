"""The encoder-decoder family: source/target pairs, teacher forcing, validation by decoding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from seqlab.config import Config
from seqlab.data import load_splits, resolve_data_dir
from seqlab.data.batching import Batch, collate
from seqlab.evaluate import EncodedSplit, evaluate
from seqlab.loss import token_nll_sum
from seqlab.model import build_model, num_parameters
from seqlab.predictors.translator import Translator
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.tokenizer import learn_tokenizers
from seqlab.train.family.base import epoch_batches


class Transduction:
    """Source/target pairs, teacher forcing (seed 000's ``train_step``), validation by ``evaluate``."""

    unit = "tokens"

    def __init__(self, config: Config, translator: Translator, train_set: EncodedSplit, valid_set: EncodedSplit) -> None:
        self.config = config
        self.translator = translator
        self.model = translator.model
        self.train_set = train_set
        self.valid_set = valid_set

    @classmethod
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool,
              parts: int = 1, share: range | None = None, runtime: Runtime | None = None) -> Transduction:
        """Read the splits, learn the tokenizers (or read them back on resume), build the model, encode the data."""
        splits = load_splits(config.data, resolve_data_dir(data_dir))
        if resume:
            source, target = run.tokenizers()
        else:
            data = config.data
            source, target = learn_tokenizers(splits["train"], config.tokens,
                                              (data.source_width is not None, data.target_width is not None))
            run.save_tokenizers(source, target)
        translator = Translator(build_model(config.model, source.vocab_size, target.vocab_size), source, target, config,
                                runtime)
        return cls(config, translator, EncodedSplit.build(translator, splits["train"], "train"),
                   EncodedSplit.build(translator, splits["valid"], "valid"))

    def use(self, runtime: Runtime) -> None:
        self.translator.runtime = runtime

    def describe(self) -> str:
        t = self.translator
        return (f"{len(self.train_set.src)} train / {len(self.valid_set.src)} valid pairs; vocab {t.source.vocab_size} "
                f"→ {t.target.vocab_size}; {num_parameters(self.model):,} parameters")

    def batches(self, epoch: int) -> list[np.ndarray]:
        return epoch_batches(self.config, epoch, [len(s) for s in self.train_set.src],
                             [len(t) for t in self.train_set.trg])

    def batch(self, indices: np.ndarray) -> Batch:
        """The padded batch of these training pairs."""
        return collate([self.train_set.src[i] for i in indices], [self.train_set.trg[i] for i in indices],
                       self.translator.target_eos)

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        batch = self.batch(indices).to(self.translator.device)
        with self.translator.autocast():
            logits = self.model(batch.src, batch.trg_in)  # (batch, trg_len, vocab)
        return token_nll_sum(logits, batch.trg_out, self.config.train.label_smoothing), self.count(batch)

    def count(self, batch: Batch) -> int:
        """What a batch's summed loss is divided by: its target tokens, or with ``train.loss_average: all``
        all its target positions, padding included (S93)."""
        return batch.trg_out.numel() if self.config.train.loss_average == "all" else batch.num_target_tokens

    def validate(self) -> dict[str, Any]:
        return evaluate(self.translator, self.valid_set, self.config.train.batch_tokens, self.config.eval.valid_limit)

    @staticmethod
    def summary(valid: dict[str, Any]) -> str:
        return (f"valid loss {valid['loss']:.4f}, ppl {valid['perplexity']:.3f}, exact {valid['exact_match']:.2f}%, "
                f"BLEU {valid['bleu']:.2f}")

    def carried(self) -> dict[str, torch.Tensor]:
        return {}  # every batch starts afresh

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        pass

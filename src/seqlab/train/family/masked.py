"""BERT's pretraining family: masked tokens, optionally next sentences."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from seqlab.config import Config
from seqlab.data import Splits, load_sentence_splits, load_splits, resolve_data_dir
from seqlab.data.batching import BatchStream
from seqlab.model import num_parameters
from seqlab.model.bert import BertConfig
from seqlab.predictors.masked_lm import Examples, MaskedLanguageModel
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.tokenizer import Tokenizer
from seqlab.train.family.base import epoch_batches


class MaskedLM:
    """BERT's pretraining (seed 002 §10.1, S99–S100): every training sentence as ``<sos> A <eos>`` (or, with
    ``model.next_sentence``, every pair as ``<sos> A <eos> B <eos>`` whose B is another pair's half of the time,
    drawn anew each epoch); each batch's masks drawn from (seed, epoch, the batch's rows), so a resumed run
    draws the same ones; the loss is the cross-entropy of the masked tokens (plus that of IsNext/NotNext,
    per pair), validated on masks drawn from a fixed seed."""

    unit = "tokens"  # the masked tokens the loss predicts

    def __init__(self, config: Config, mlm: MaskedLanguageModel, train: list[str] | list[tuple[str, str]],
                 valid: Examples) -> None:
        assert isinstance(config.model, BertConfig)
        self.config = config
        self.bert: BertConfig = config.model
        self.mlm = mlm
        self.model = mlm.model
        self.train = train
        self.valid = valid
        self.epoch = 1
        self.examples = self._examples(1)  # the inputs of the epoch ``batches`` was last asked for

    @classmethod
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool,
              parts: int = 1, share: range | None = None, runtime: Runtime | None = None) -> MaskedLM:
        """Read the sentences (or pairs), learn the tokenizer with <mask> (or read it back), build BERT."""
        assert isinstance(config.model, BertConfig)
        splits: Splits[str] | Splits[tuple[str, str]]
        if config.model.next_sentence:
            splits = pairs = load_splits(config.data, resolve_data_dir(data_dir))
            texts = [text for pair in pairs["train"] for text in pair]
        else:
            splits = sentences = load_sentence_splits(config.data, resolve_data_dir(data_dir))
            texts = list(sentences["train"])
        if resume:
            tokenizer, _ = run.tokenizers()
        else:
            tokenizer = Tokenizer.train(texts, config.tokens.source, mask=True)
            run.save_tokenizers(tokenizer, tokenizer)
        mlm = MaskedLanguageModel(MaskedLanguageModel.build(config, tokenizer.vocab_size), tokenizer, config,
                                  runtime)
        return cls(config, mlm, splits["train"], mlm.examples(splits["valid"], np.random.default_rng(0)))

    def _examples(self, epoch: int) -> Examples:
        """The sentences; or the pairs with that epoch's next sentences."""
        return self.mlm.examples(self.train, np.random.default_rng([self.config.seed, epoch]))

    def use(self, runtime: Runtime) -> None:
        self.mlm.runtime = runtime

    def describe(self) -> str:
        what = "pairs (next-sentence prediction)" if self.bert.next_sentence else "sentences"
        return (f"{len(self.train)} train / {len(self.valid.ids)} valid {what}; vocab {self.mlm.tokenizer.vocab_size} "
                f"(<mask> at 4); {num_parameters(self.model):,} parameters")

    def batches(self, epoch: int) -> list[BatchStream]:
        """That epoch's batches; also makes that epoch's inputs (next sentences) the ones ``loss`` reads."""
        if epoch != self.epoch and self.bert.next_sentence:
            self.examples = self._examples(epoch)
        self.epoch = epoch
        return epoch_batches(self.config, epoch, self.examples.ids)

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        rng = np.random.default_rng([self.config.seed, self.epoch, *indices.tolist()])
        out = self.mlm.losses(self.examples, indices.tolist(), rng)
        total = out["mlm_sum"]
        if "nsp_sum" in out:  # per pair, weighed like the masked tokens' mean: loss = mean MLM + mean NSP
            total = total + out["nsp_sum"] * out["predicted"] / len(indices)
        return total, out["predicted"]

    def validate(self) -> dict[str, Any]:
        return self.mlm.scores(self.valid)

    @staticmethod
    def summary(valid: dict[str, Any]) -> str:
        nsp = f", next sentence {valid['nsp_accuracy']:.2f}%" if "nsp_accuracy" in valid else ""
        return (f"valid masked loss {valid['loss']:.4f}, ppl {valid['perplexity']:.2f}, "
                f"masked tokens right {valid['mlm_accuracy']:.2f}%{nsp}")

    def carried(self) -> dict[str, torch.Tensor]:
        return {}

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        pass

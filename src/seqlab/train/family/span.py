"""The span-extraction family: questions about contexts, the answer's first and last token learned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from seqlab.config import Config
from seqlab.data import resolve_data_dir
from seqlab.data.batching import BatchStream
from seqlab.data.splits import load_question_splits
from seqlab.evaluate import QuestionSplit, evaluate_answerer
from seqlab.loss import class_nll_sum
from seqlab.model import num_parameters
from seqlab.model.span import SpanConfig
from seqlab.predictors.answerer import Answerer
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.tokenizer import Tokenizer
from seqlab.train.family.base import epoch_batches
from seqlab.train.family.classification import take_pretrained_encoder


class SpanExtraction:
    """SQuAD-format questions (BERT's question answering, S102–S103): ``<sos> question <eos> context <eos>`` in,
    the cross-entropies of the first reference answer's first and last token out, averaged; trained on the
    questions whose answer is in the context as read; validated by SQuAD's exact match and F1
    (``evaluate_answerer``). May start from a pretrained BERT."""

    unit = "questions"

    def __init__(self, config: Config, answerer: Answerer, train_set: QuestionSplit, valid_set: QuestionSplit) -> None:
        self.config = config
        self.answerer = answerer
        self.model = answerer.model
        self.train_set = train_set
        self.valid_set = valid_set
        self.trainable = np.flatnonzero(train_set.spans[:, 0] >= 0)  # questions whose answer was not cut off

    @classmethod
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool,
              parts: int = 1, share: range | None = None, runtime: Runtime | None = None) -> SpanExtraction:
        """Read the questions, learn the tokenizer from questions and contexts (or read it back), build the model."""
        assert isinstance(config.model, SpanConfig)
        splits = load_question_splits(config.data, resolve_data_dir(data_dir))
        pretrained = RunDir(config.model.init_from) if config.model.init_from else None
        if resume:
            tokenizer, _ = run.tokenizers()
        else:
            texts = [q.question for q in splits["train"]] + list(dict.fromkeys(q.context for q in splits["train"]))
            tokenizer = pretrained.tokenizers()[0] if pretrained else Tokenizer.train(texts, config.tokens.source)
            run.save_tokenizers(tokenizer, tokenizer)
        model = Answerer.build(config, tokenizer.vocab_size)
        if pretrained and not resume:  # on resume the checkpoint holds the weights
            take_pretrained_encoder(model.encoder, config.model, pretrained, tokenizer.vocab_size)
        answerer = Answerer(model, tokenizer, config, runtime)
        return cls(config, answerer, QuestionSplit.build(answerer, splits["train"], "train"),
                   QuestionSplit.build(answerer, splits["valid"], "valid"))

    def use(self, runtime: Runtime) -> None:
        self.answerer.runtime = runtime

    def describe(self) -> str:
        cut = len(self.train_set.rows) - len(self.trainable)
        skipped = f" ({cut} whose answer was cut off are left out)" if cut else ""
        return (f"{len(self.trainable)} train{skipped} / {len(self.valid_set.rows)} valid questions; "
                f"vocab {self.answerer.tokenizer.vocab_size}; {num_parameters(self.model):,} parameters")

    def batches(self, epoch: int) -> list[BatchStream]:
        streams = epoch_batches(self.config, epoch, [self.train_set.rows[i].ids for i in self.trainable])
        return [[self.trainable[b] for b in stream] for stream in streams]

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        with self.answerer.autocast():
            start, end = self.model(*self.answerer.batch([self.train_set.rows[i] for i in indices]))  # (batch, len)
        spans = torch.from_numpy(self.train_set.spans[indices]).to(self.answerer.device)  # (batch, 2)
        return (class_nll_sum(start, spans[:, 0]) + class_nll_sum(end, spans[:, 1])) / 2, len(indices)

    def validate(self) -> dict[str, Any]:
        return evaluate_answerer(self.answerer, self.valid_set)

    @staticmethod
    def summary(valid: dict[str, Any]) -> str:
        return f"valid loss {valid['loss']:.4f}, exact {valid['exact_match']:.2f}%, F1 {valid['f1']:.2f}%"

    def carried(self) -> dict[str, torch.Tensor]:
        return {}

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        pass

"""The classifier family (one label per text), and how an encoder-only model starts from a pretrained BERT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from seqlab import registry
from seqlab.config import Config
from seqlab.data import load_splits, resolve_data_dir
from seqlab.data.batching import BatchStream, pad
from seqlab.evaluate import LabelledSplit, evaluate_classifier
from seqlab.loss import class_nll_sum
from seqlab.model import build_classifier, num_parameters
from seqlab.model.bert import Bert, BertConfig, EncoderShape
from seqlab.model.classifier import EncoderConfig
from seqlab.predictors.classifier import Classifier, class_labels
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.tokenizer import Tokenizer
from seqlab.train.family.base import epoch_batches


class Classification:
    """Texts with one label each (seed 001's classification, S106): ``<sos> text <eos>`` in, the class out,
    cross-entropy over the classes; validated by accuracy and F1 (``evaluate_classifier``)."""

    unit = "texts"

    def __init__(self, config: Config, classifier: Classifier, train_set: LabelledSplit, valid_set: LabelledSplit) -> None:
        self.config = config
        self.classifier = classifier
        self.model = classifier.model
        self.train_set = train_set
        self.valid_set = valid_set

    @classmethod
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool,
              parts: int = 1, share: range | None = None, runtime: Runtime | None = None) -> Classification:
        """Read the (text, label) splits, learn the tokenizer and the classes (or read them back), build the model."""
        assert isinstance(config.model, EncoderConfig)
        splits = load_splits(config.data, resolve_data_dir(data_dir))
        pretrained = RunDir(config.model.init_from) if config.model.init_from else None
        if resume:
            tokenizer, _ = run.tokenizers()
            labels = run.labels()
        else:
            texts = [text for text, _ in splits["train"]]
            tokenizer = pretrained.tokenizers()[0] if pretrained else Tokenizer.train(texts, config.tokens.source)
            labels = class_labels([label for _, label in splits["train"]])
            run.save_tokenizers(tokenizer, tokenizer)
            run.save_labels(labels)
        model = build_classifier(config.model, tokenizer.vocab_size, len(labels))
        if pretrained and not resume:  # on resume the checkpoint holds the weights
            take_pretrained_encoder(model.encoder, config.model, pretrained, tokenizer.vocab_size)
        classifier = Classifier(model, tokenizer, labels, config, runtime)
        return cls(config, classifier, LabelledSplit.build(classifier, splits["train"], "train"),
                   LabelledSplit.build(classifier, splits["valid"], "valid"))

    def use(self, runtime: Runtime) -> None:
        self.classifier.runtime = runtime

    def describe(self) -> str:
        counts = np.bincount(self.train_set.labels, minlength=len(self.classifier.labels))
        classes = ", ".join(f"{label} {n}" for label, n in zip(self.classifier.labels, counts))
        return (f"{len(self.train_set.src)} train / {len(self.valid_set.src)} valid texts; classes {classes}; "
                f"vocab {self.classifier.tokenizer.vocab_size}; {num_parameters(self.model):,} parameters")

    def batches(self, epoch: int) -> list[BatchStream]:
        return epoch_batches(self.config, epoch, self.train_set.src)

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        src = pad([self.train_set.src[i] for i in indices]).to(self.classifier.device)  # (batch, len)
        with self.classifier.autocast():
            logits = self.model(src)  # (batch, classes)
        labels = torch.from_numpy(self.train_set.labels[indices]).to(self.classifier.device)
        return class_nll_sum(logits, labels, self.config.train.label_smoothing), len(indices)

    def validate(self) -> dict[str, Any]:
        return evaluate_classifier(self.classifier, self.valid_set)

    @staticmethod
    def summary(valid: dict[str, Any]) -> str:
        return (f"valid loss {valid['loss']:.4f}, accuracy {valid['accuracy']:.2f}%, "
                f"macro-F1 {valid['macro_f1']:.2f}%")

    def carried(self) -> dict[str, torch.Tensor]:
        return {}

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        pass


SHAPE_KEYS = ("d_model", "num_layers", "num_heads", "d_ff", "norm", "max_length", "positions", "segments", "activation")


def take_pretrained_encoder(encoder: nn.Module, cfg: EncoderShape, pretrained: RunDir, vocab_size: int) -> None:
    """Load the encoder of a ``seqlab pretrain`` run into ``encoder`` (BERT's fine-tuning starts from it); the
    shapes must agree, key by key."""
    try:
        registry.expect_kind(pretrained.path, "bert")
    except ValueError as exc:
        raise ValueError(f"model.init_from: {exc}") from None
    saved = pretrained.config().model
    assert isinstance(saved, BertConfig)
    differ = [f"{key} {getattr(cfg, key)} (pretrained: {getattr(saved, key)})" for key in SHAPE_KEYS
              if getattr(cfg, key) != getattr(saved, key)]
    if differ:
        raise ValueError(f"model.init_from: {pretrained.path} has another shape: model.{', model.'.join(differ)}")
    bert = Bert(saved, vocab_size)
    pretrained.load_model(bert)
    encoder.load_state_dict(bert.encoder.state_dict())

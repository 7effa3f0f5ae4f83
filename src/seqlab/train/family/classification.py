"""The classifier family (one label per text), and how an encoder-only model starts from a pretrained BERT."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import torch
from torch import nn

from seqlab import registry
from seqlab.config import Config
from seqlab.data import DataError, Pair, load_splits, resolve_data_dir
from seqlab.data.batching import BatchStream, pad
from seqlab.data.prepared import CHUNK_ROWS, IDS, Counted, Preparation, open_prepared, prepared_sections
from seqlab.data.splits import streamed_train
from seqlab.evaluate import LabelledSplit, evaluate_classifier
from seqlab.loss import class_nll_sum
from seqlab.model import build_classifier, num_parameters
from seqlab.model.bert import Bert, BertConfig, EncoderShape
from seqlab.model.classifier import EncoderConfig
from seqlab.model.ngrams import NgramHead
from seqlab.predictors.classifier import Classifier, class_labels
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.tokenizer import Tokenizer
from seqlab.train.family.base import epoch_batches, ngrams_beside, prepared_tokenizers


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
        """Read the (text, label) splits, learn the tokenizer and the classes (or read them back), build the model;
        or, with ``data.prepared``, take the tokenizer, the classes and the encoded splits from that directory."""
        assert isinstance(config.model, EncoderConfig)
        pretrained = RunDir(config.model.init_from) if config.model.init_from else None
        if config.data.prepared is not None:
            return cls._from_prepared(config, run, resume, runtime, pretrained)
        splits = load_splits(config.data, resolve_data_dir(data_dir))
        if resume:
            tokenizer, _ = run.tokenizers()
            labels = run.labels()
        else:
            tokenizer, labels = _learn(config, splits["train"], pretrained)
            run.save_tokenizers(tokenizer, tokenizer)
            run.save_labels(labels)
        classifier = _classifier(config, tokenizer, labels, None if resume else pretrained, runtime)
        train = LabelledSplit.build(classifier, splits["train"], "train")
        _ngram_head(config, run, resume, classifier, train)
        return cls(config, classifier, train, LabelledSplit.build(classifier, splits["valid"], "valid"))

    @classmethod
    def _from_prepared(cls, config: Config, run: RunDir, resume: bool, runtime: Runtime | None,
                       pretrained: RunDir | None) -> Classification:
        """The tokenizer, classes and splits of ``data.prepared``, ``train.batch_window`` chunks of ids read at a
        time; its tokenizer must be the pretrained run's where the model starts from one."""
        prepared = open_prepared(cast(str, config.data.prepared), prepared_sections(config))
        tokenizer, _ = prepared_tokenizers(prepared, run, resume)
        if pretrained and tokenizer.to_json() != pretrained.tokenizers()[0].to_json():
            raise DataError(f"{prepared.path}: not prepared with the tokenizer of model.init_from ({pretrained.path}); "
                            "prepare it again with this config")
        labels = list(prepared.manifest["labels"])
        if not resume:
            run.save_labels(labels)
        elif run.labels() != labels:
            raise DataError(f"{prepared.path}: its classes are not the run's; resume from the directory it trained on")
        classifier = _classifier(config, tokenizer, labels, None if resume else pretrained, runtime)
        window = config.train.batch_window
        train = LabelledSplit.prepared(prepared, "train", window)
        _ngram_head(config, run, resume, classifier, train)
        return cls(config, classifier, train, LabelledSplit.prepared(prepared, "valid", window))

    @classmethod
    def prepare(cls, config: Config, data_dir: str | Path | None, out: Path, progress: bool = True,
                chunk_rows: int = CHUNK_ROWS, workers: int = 1) -> dict[str, Any]:
        """``seqlab data prepare``: the classes and the tokenizer (learnt, or model.init_from's), then every split's
        inputs, texts and class indices as ``build`` encodes them; the classes in the manifest."""
        assert isinstance(config.model, EncoderConfig)
        where = resolve_data_dir(data_dir)
        splits = load_splits(config.data, where)
        train = Counted(streamed_train(config.data, where) or splits["train"], "texts", progress)
        pretrained = RunDir(config.model.init_from) if config.model.init_from else None
        tokenizer, labels = _learn(config, train, pretrained)
        with torch.device("meta"):  # the classifier encodes; its model is never run
            classifier = Classifier(build_classifier(config.model, tokenizer.vocab_size, len(labels)), tokenizer,
                                    labels, config, Runtime())

        def encode(pairs: list[Pair], name: str) -> dict[str, list[Any]]:
            texts = [text for text, _ in pairs]
            return {"src": classifier.encode(texts, name), "text": texts,
                    "label": classifier.label_ids([label for _, label in pairs], f"the {name} split")}

        preparation = Preparation({"source": tokenizer.to_json()}, {"src": IDS, "text": pa.string(), "label": pa.int32()},
                                  encode, "texts", {"labels": labels})
        return preparation.write(config, out, train, splits, chunk_rows, progress, workers)

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


def _learn(config: Config, train: Iterable[Pair], pretrained: RunDir | None) -> tuple[Tokenizer, list[str]]:
    """The classes of the training labels, and the tokenizer learnt from the training texts (or the pretrained
    run's): two passes over ``train``."""
    labels = class_labels(list({label for _, label in train}))
    if pretrained:
        return pretrained.tokenizers()[0], labels
    return Tokenizer.train((text for text, _ in train), config.tokens.source), labels


def _ngram_head(config: Config, run: RunDir, resume: bool, classifier: Classifier, train: LabelledSplit) -> None:
    """``model.ngrams``' head on ``classifier``: fitted on the training texts and saved before the first epoch, so
    that every validation averages with it; read back on resume."""
    assert isinstance(config.model, EncoderConfig)
    cfg = config.model.ngrams
    if cfg is not None:
        classifier.ngrams = ngrams_beside(
            run, resume, NgramHead, cfg, lambda: NgramHead.fit(cfg, list(train.texts), train.labels, len(classifier.labels)))


def _classifier(config: Config, tokenizer: Tokenizer, labels: list[str], pretrained: RunDir | None,
                runtime: Runtime | None) -> Classifier:
    """The model (its encoder from ``pretrained`` where given: not on resume, where the checkpoint holds the
    weights) as the classifier that trains it."""
    assert isinstance(config.model, EncoderConfig)
    model = build_classifier(config.model, tokenizer.vocab_size, len(labels))
    if pretrained:
        take_pretrained_encoder(model.encoder, config.model, pretrained, tokenizer.vocab_size)
    return Classifier(model, tokenizer, labels, config, runtime)


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

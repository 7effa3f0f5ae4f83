"""A model family as the training loop sees it: its model, its batches, how a batch becomes a loss, and what
validation reports. ``Trainer`` runs any ``Family``; ``Seq2seq`` is the encoder-decoder one (Transformer and
RNN seq2seq: teacher forcing on source/target pairs, validated by ``evaluate``); ``StreamLM`` the language
model (one token stream, stateful truncated BPTT, validated by perplexity over the whole valid stream);
``Classification`` the encoder-only classifier (one label per text, validated by accuracy and F1), which may
start from a pretrained BERT; ``MaskedLM`` BERT's pretraining (masked tokens, optionally next sentences).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from seqlab.classifier import Classifier, class_labels
from seqlab.config import BertConfig, Config, EncoderConfig, EncoderShape, LMConfig, TransformerLMConfig
from seqlab.data import load_sentence_splits, load_splits, resolve_data_dir
from seqlab.data.batching import Batch, collate, length_batches, pad, random_batches
from seqlab.data.stream import tbptt_batches
from seqlab.evaluate import EncodedSplit, LabelledSplit, evaluate, evaluate_classifier
from seqlab.language_model import LanguageModel
from seqlab.loss import class_nll_sum, token_nll_sum
from seqlab.masked_lm import Examples, MaskedLanguageModel
from seqlab.model import build_classifier, build_lm, build_model, num_parameters
from seqlab.model.bert import Bert
from seqlab.model.lm import LMState, flatten_state, unflatten_state
from seqlab.rundir import RunDir
from seqlab.tokenizer import Tokenizer, learn_tokenizers
from seqlab.translator import Translator


class Family(Protocol):
    unit: str  # what a batch's loss is summed over: "tokens" (target tokens) or "texts" (a classifier's inputs)

    @property
    def model(self) -> nn.Module:
        """The model being trained."""

    def describe(self) -> str:
        """The data and model sizes, for the line training starts with."""

    def batches(self, epoch: int) -> list[np.ndarray]:
        """That epoch's batches (index arrays into the training set), in training order; fixed by the seed."""

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        """The summed training loss of one batch and the number of ``unit`` it is summed over."""

    def validate(self) -> dict[str, Any]:
        """The valid metrics; 'loss' among them."""

    def summary(self, valid: dict[str, Any]) -> str:
        """The valid metrics for the line that ends an epoch."""

    def carried(self) -> dict[str, torch.Tensor]:
        """What a batch hands to the next beyond the weights (a language model's state), for the checkpoint."""

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        """Take back what ``carried`` gave, on resume."""


def epoch_batches(config: Config, epoch: int, src_lengths: list[int], trg_lengths: list[int] | None = None
                  ) -> list[np.ndarray]:
    """An epoch's batches of the training inputs: ``train.batch_sentences`` at a time in random order, or grouped
    by length under ``train.batch_tokens`` (inputs plus targets, if any); the order fixed by (seed, epoch)."""
    cfg, seed = config.train, config.seed * 1_000_003 + epoch
    if cfg.batch_sentences:
        return random_batches(len(src_lengths), cfg.batch_sentences, seed)
    return length_batches(src_lengths, trg_lengths or [0] * len(src_lengths), cfg.batch_tokens, seed)


class Seq2seq:
    """Source/target pairs, teacher forcing (seed 000's ``train_step``), validation by ``evaluate``."""

    unit = "tokens"

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
        return epoch_batches(self.config, epoch, [len(s) for s in self.train_set.src],
                             [len(t) for t in self.train_set.trg])

    def batch(self, indices: np.ndarray) -> Batch:
        """The padded batch of these training pairs."""
        return collate([self.train_set.src[i] for i in indices], [self.train_set.trg[i] for i in indices])

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        batch = self.batch(indices)
        with self.translator.autocast():
            logits = self.model(batch.src, batch.trg_in)  # (batch, trg_len, vocab)
        return token_nll_sum(logits, batch.trg_out, self.config.train.label_smoothing), self.count(batch)

    def count(self, batch: Batch) -> int:
        """What a batch's summed loss is divided by: its target tokens, or with ``train.loss_average: all``
        all its target positions, padding included (S93)."""
        return batch.trg_out.numel() if self.config.train.loss_average == "all" else batch.num_target_tokens

    def validate(self) -> dict[str, Any]:
        return evaluate(self.translator, self.valid_set, self.config.train.batch_tokens, self.config.eval.valid_limit)

    def summary(self, valid: dict[str, Any]) -> str:
        return (f"valid loss {valid['loss']:.4f}, ppl {valid['perplexity']:.3f}, exact {valid['exact_match']:.2f}%, "
                f"BLEU {valid['bleu']:.2f}")

    def carried(self) -> dict[str, torch.Tensor]:
        return {}  # every batch starts afresh

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        pass


class StreamLM:
    """A language model over one token stream (seed 002 ch. 5): the training sentences, each followed by
    ``<eos>``, cut by ``data.stream.tbptt_batches`` into ``train.streams`` rows of ``train.time_size`` steps;
    the RNN's state is carried from batch to batch, detached (truncated BPTT), and reset when an epoch starts
    (a causal Transformer carries nothing: its context is its window)."""

    unit = "tokens"

    def __init__(self, config: Config, lm: LanguageModel, train_stream: np.ndarray, valid: list[str]) -> None:
        self.config = config
        self.lm = lm
        self.model = lm.model
        self.inputs, self.targets = tbptt_batches(train_stream, config.train.streams, config.train.time_size)  # (K, B, T)
        self.valid = valid
        self.state: LMState | None = None

    @classmethod
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool) -> StreamLM:
        assert isinstance(config.model, LMConfig | TransformerLMConfig)
        splits = load_sentence_splits(config.data, resolve_data_dir(data_dir))
        if resume:
            tokenizer, _ = run.tokenizers()
        else:
            tokenizer = Tokenizer.train(splits["train"], config.tokens.source)
            run.save_tokenizers(tokenizer, tokenizer)
        lm = LanguageModel(build_lm(config.model, tokenizer.vocab_size), tokenizer, config)
        return cls(config, lm, lm.stream(splits["train"]), splits["valid"])

    def describe(self) -> str:
        batches, rows, steps = self.inputs.shape
        return (f"a stream of {batches * rows * steps:,} train tokens in {batches} batches of {rows} × {steps}; "
                f"{len(self.valid)} valid sentences; vocab {self.lm.tokenizer.vocab_size}; "
                f"{num_parameters(self.model):,} parameters")

    def batches(self, epoch: int) -> list[np.ndarray]:
        return [np.array([k]) for k in range(len(self.inputs))]  # in stream order: each row continues the last

    def batch(self, indices: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, bool]:
        """Inputs and targets (B, T) of batch ``indices[0]``, and whether it starts the stream (an epoch)."""
        k = int(indices[0])
        return torch.from_numpy(self.inputs[k]), torch.from_numpy(self.targets[k]), k == 0

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        x, t, fresh = self.batch(indices)
        if fresh:
            self.state = None  # a new epoch reads the stream from the start
        with self.lm.autocast():
            logits, state = self.model(x, self.state)  # (B, T, V)
        self.state = self.model.detach(state)
        return token_nll_sum(logits, t), t.numel()

    def validate(self) -> dict[str, Any]:
        metrics = self.lm.perplexity(self.valid)
        self.model.train()
        return metrics

    def summary(self, valid: dict[str, Any]) -> str:
        return f"valid loss {valid['loss']:.4f}, ppl {valid['perplexity']:.2f}"

    def carried(self) -> dict[str, torch.Tensor]:
        return {} if self.state is None else flatten_state(self.state)

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        self.state = unflatten_state(carried) if carried else None


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
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool) -> Classification:
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
        classifier = Classifier(model, tokenizer, labels, config)
        return cls(config, classifier, LabelledSplit.build(classifier, splits["train"], "train"),
                   LabelledSplit.build(classifier, splits["valid"], "valid"))

    def describe(self) -> str:
        counts = np.bincount(self.train_set.labels, minlength=len(self.classifier.labels))
        classes = ", ".join(f"{label} {n}" for label, n in zip(self.classifier.labels, counts))
        return (f"{len(self.train_set.src)} train / {len(self.valid_set.src)} valid texts; classes {classes}; "
                f"vocab {self.classifier.tokenizer.vocab_size}; {num_parameters(self.model):,} parameters")

    def batches(self, epoch: int) -> list[np.ndarray]:
        return epoch_batches(self.config, epoch, [len(s) for s in self.train_set.src])

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        src = pad([self.train_set.src[i] for i in indices])  # (batch, len)
        with self.classifier.autocast():
            logits = self.model(src)  # (batch, classes)
        labels = torch.from_numpy(self.train_set.labels[indices])
        return class_nll_sum(logits, labels, self.config.train.label_smoothing), len(indices)

    def validate(self) -> dict[str, Any]:
        return evaluate_classifier(self.classifier, self.valid_set)

    def summary(self, valid: dict[str, Any]) -> str:
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
    saved = pretrained.config().model
    if not isinstance(saved, BertConfig):
        raise ValueError(f"model.init_from: {pretrained.path} is not a seqlab pretrain run (model.type {saved.type})")
    differ = [f"{key} {getattr(cfg, key)} (pretrained: {getattr(saved, key)})" for key in SHAPE_KEYS
              if getattr(cfg, key) != getattr(saved, key)]
    if differ:
        raise ValueError(f"model.init_from: {pretrained.path} has another shape: model.{', model.'.join(differ)}")
    bert = Bert(saved, vocab_size)
    pretrained.load_model(bert)
    encoder.load_state_dict(bert.encoder.state_dict())


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
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool) -> MaskedLM:
        """Read the sentences (or pairs), learn the tokenizer with <mask> (or read it back), build BERT."""
        assert isinstance(config.model, BertConfig)
        if config.model.next_sentence:
            splits: dict[str, list[str]] | dict[str, list[tuple[str, str]]] = load_splits(
                config.data, resolve_data_dir(data_dir))
            texts = [text for pair in splits["train"] for text in pair]
        else:
            splits = load_sentence_splits(config.data, resolve_data_dir(data_dir))
            texts = list(splits["train"])
        if resume:
            tokenizer, _ = run.tokenizers()
        else:
            tokenizer = Tokenizer.train(texts, config.tokens.source, mask=True)
            run.save_tokenizers(tokenizer, tokenizer)
        mlm = MaskedLanguageModel(Bert(config.model, tokenizer.vocab_size), tokenizer, config)
        return cls(config, mlm, splits["train"], mlm.examples(splits["valid"], np.random.default_rng(0)))

    def _examples(self, epoch: int) -> Examples:
        """The sentences; or the pairs with that epoch's next sentences."""
        return self.mlm.examples(self.train, np.random.default_rng([self.config.seed, epoch]))

    def describe(self) -> str:
        what = "pairs (next-sentence prediction)" if self.bert.next_sentence else "sentences"
        return (f"{len(self.train)} train / {len(self.valid.ids)} valid {what}; vocab {self.mlm.tokenizer.vocab_size} "
                f"(<mask> at 4); {num_parameters(self.model):,} parameters")

    def batches(self, epoch: int) -> list[np.ndarray]:
        """That epoch's batches; also makes that epoch's inputs (next sentences) the ones ``loss`` reads."""
        if epoch != self.epoch and self.bert.next_sentence:
            self.examples = self._examples(epoch)
        self.epoch = epoch
        return epoch_batches(self.config, epoch, [len(row) for row in self.examples.ids])

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        rng = np.random.default_rng([self.config.seed, self.epoch, *indices.tolist()])
        out = self.mlm.losses(self.examples, indices.tolist(), rng)
        total = out["mlm_sum"]
        if "nsp_sum" in out:  # per pair, weighed like the masked tokens' mean: loss = mean MLM + mean NSP
            total = total + out["nsp_sum"] * out["predicted"] / len(indices)
        return total, out["predicted"]

    def validate(self) -> dict[str, Any]:
        return self.mlm.scores(self.valid)

    def summary(self, valid: dict[str, Any]) -> str:
        nsp = f", next sentence {valid['nsp_accuracy']:.2f}%" if "nsp_accuracy" in valid else ""
        return (f"valid masked loss {valid['loss']:.4f}, ppl {valid['perplexity']:.2f}, "
                f"masked tokens right {valid['mlm_accuracy']:.2f}%{nsp}")

    def carried(self) -> dict[str, torch.Tensor]:
        return {}

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        pass


def build_family(config: Config, run: RunDir, data_dir: str | Path | None, resume: bool) -> Family:
    """The family that trains ``config.model``: a language model (``lm``, ``transformer_lm``), a classifier
    (``encoder``), BERT's pretraining (``bert``) or a seq2seq model (the others)."""
    if config.is_language_model:
        return StreamLM.build(config, run, data_dir, resume)
    if config.is_classifier:
        return Classification.build(config, run, data_dir, resume)
    if config.is_masked_lm:
        return MaskedLM.build(config, run, data_dir, resume)
    return Seq2seq.build(config, run, data_dir, resume)

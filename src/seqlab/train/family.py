"""A model family as the training loop sees it: its model, its batches, how a batch becomes a loss, and what
validation reports. ``Trainer`` runs any ``Family``; ``Seq2seq`` is the encoder-decoder one (Transformer and
RNN seq2seq: teacher forcing on source/target pairs, validated by ``evaluate``); ``StreamLM`` the language
model (one token stream, stateful truncated BPTT, validated by perplexity over the whole valid stream).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from seqlab.config import Config, LMConfig, TransformerLMConfig
from seqlab.data import load_sentence_splits, load_splits, resolve_data_dir
from seqlab.data.batching import Batch, collate, length_batches, random_batches
from seqlab.data.stream import tbptt_batches
from seqlab.evaluate import EncodedSplit, evaluate
from seqlab.language_model import LanguageModel
from seqlab.loss import token_nll_sum
from seqlab.model import build_lm, build_model, num_parameters
from seqlab.model.lm import LMState, flatten_state, unflatten_state
from seqlab.rundir import RunDir
from seqlab.tokenizer import Tokenizer, learn_tokenizers
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

    def carried(self) -> dict[str, torch.Tensor]:
        """What a batch hands to the next beyond the weights (a language model's state), for the checkpoint."""

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        """Take back what ``carried`` gave, on resume."""


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


def build_family(config: Config, run: RunDir, data_dir: str | Path | None, resume: bool) -> Family:
    """The family that trains ``config.model``: a language model (``lm``) or a seq2seq model (the others)."""
    if config.is_language_model:
        return StreamLM.build(config, run, data_dir, resume)
    return Seq2seq.build(config, run, data_dir, resume)

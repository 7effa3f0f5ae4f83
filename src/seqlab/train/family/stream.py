"""The language-model family: one token stream read by truncated BPTT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from seqlab.config import Config, LMConfig, TransformerLMConfig
from seqlab.data import load_sentence_splits, resolve_data_dir
from seqlab.data.stream import tbptt_batches
from seqlab.language_model import LanguageModel
from seqlab.loss import token_nll_sum
from seqlab.model import build_lm, num_parameters
from seqlab.model.lm import LMState, flatten_state, unflatten_state
from seqlab.rundir import RunDir
from seqlab.tokenizer import Tokenizer


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

"""The language-model family: one token stream read by truncated BPTT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from seqlab.config import Config, ConfigError
from seqlab.data import load_sentence_splits, resolve_data_dir
from seqlab.data.batching import BatchStream
from seqlab.data.stream import tbptt_batches
from seqlab.loss import token_nll_sum
from seqlab.model import num_parameters
from seqlab.model.lm import LMConfig, LMState, flatten_state, unflatten_state
from seqlab.model.transformer_lm import TransformerLMConfig
from seqlab.predictors.language_model import LanguageModel
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.tokenizer import Tokenizer


class StreamLM:
    """A language model over one token stream (seed 002 ch. 5): the training sentences, each followed by
    ``<eos>``, cut by ``data.stream.tbptt_batches`` into ``train.streams`` rows of ``train.time_size`` steps;
    the RNN's state is carried from batch to batch, detached (truncated BPTT), and reset when an epoch starts
    unless ``train.carry_state`` (a causal Transformer carries nothing: its context is its window).

    With ``parts`` > 1 (processes × ``train.accumulate``) each step's rows are cut into ``parts`` groups, one
    batch each (``[k, group]``): a group's rows carry their own state, so a step's batches may run in any
    process, and their mean loss is the whole step's."""

    unit = "tokens"

    def __init__(self, config: Config, lm: LanguageModel, train_stream: np.ndarray, valid: list[str],
                 parts: int = 1, share: range | None = None) -> None:
        self.config = config
        self.lm = lm
        self.model = lm.model
        self.inputs, self.targets = tbptt_batches(train_stream, config.train.streams, config.train.time_size)  # (K, B, T)
        self.valid = valid
        self.parts = parts
        self.share = share or range(parts)  # the groups this process trains
        self.rows = config.train.streams // parts  # rows per group
        self.states: dict[int, LMState] = {}  # each group's state

    @classmethod
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool,
              parts: int = 1, share: range | None = None, runtime: Runtime | None = None) -> StreamLM:
        assert isinstance(config.model, LMConfig | TransformerLMConfig)
        if config.train.streams % parts:
            raise ConfigError(f"train.streams ({config.train.streams}) must be a multiple of the processes × "
                              f"train.accumulate ({parts}): each takes the same number of rows")
        splits = load_sentence_splits(config.data, resolve_data_dir(data_dir))
        if resume:
            tokenizer, _ = run.tokenizers()
        else:
            tokenizer = Tokenizer.train(splits["train"], config.tokens.source)
            run.save_tokenizers(tokenizer, tokenizer)
        lm = LanguageModel(LanguageModel.build(config, tokenizer.vocab_size), tokenizer, config, runtime)
        return cls(config, lm, lm.stream(splits["train"]), splits["valid"], parts, share)

    def use(self, runtime: Runtime) -> None:
        self.lm.runtime = runtime

    def describe(self) -> str:
        batches, rows, steps = self.inputs.shape
        return (f"a stream of {batches * rows * steps:,} train tokens in {batches} batches of {rows} × {steps}; "
                f"{len(self.valid)} valid sentences; vocab {self.lm.tokenizer.vocab_size}; "
                f"{num_parameters(self.model):,} parameters")

    def batches(self, epoch: int) -> list[BatchStream]:
        """``[k, group]`` in stream order (each row continues the last), a step's groups together: one stream."""
        return [[np.array([k, g]) for k in range(len(self.inputs)) for g in range(self.parts)]]

    def batch(self, indices: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, bool]:
        """Inputs and targets (B / parts, T) of step ``indices[0]``'s row group ``indices[1]``, and whether its
        rows start from zeros: at the stream's start (an epoch's), unless ``train.carry_state``."""
        k, rows = int(indices[0]), slice(int(indices[1]) * self.rows, (int(indices[1]) + 1) * self.rows)
        fresh = k == 0 and not self.config.train.carry_state
        return torch.from_numpy(self.inputs[k][rows]), torch.from_numpy(self.targets[k][rows]), fresh

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        x, t, fresh = self.batch(indices)
        x, t = x.to(self.lm.device), t.to(self.lm.device)
        group = int(indices[1])
        if fresh:
            self.states.pop(group, None)  # a new epoch reads the stream from the start
        with self.lm.autocast():
            logits, state = self.model(x, self.states.get(group))  # (B / parts, T, V)
        state = self.model.detach(state)
        if state is not None:  # a causal Transformer carries nothing
            self.states[group] = state
        return token_nll_sum(logits, t), t.numel()

    def validate(self) -> dict[str, Any]:
        metrics = self.lm.perplexity(self.valid)
        self.model.train()
        return metrics

    @staticmethod
    def summary(valid: dict[str, Any]) -> str:
        return f"valid loss {valid['loss']:.4f}, ppl {valid['perplexity']:.2f}"

    def carried(self) -> dict[str, torch.Tensor]:
        """The state of all rows (``h0``, ``c0`` ...: (layers, B, H)); a group this process does not train is
        zeros, so that the processes' sum is the whole state (``World.sum_tensors``)."""
        named = {g: flatten_state(state) for g, state in self.states.items() if g in self.share}
        if not named:
            return {}
        template = next(iter(named.values()))
        return {name: torch.cat([named[g][name] if g in named else torch.zeros_like(t) for g in range(self.parts)],
                                dim=1) for name, t in template.items()}

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        if not carried:
            self.states = {}
            return
        groups = {name: [p.contiguous() for p in t.chunk(self.parts, dim=1)] for name, t in carried.items()}  # rows: dim 1
        self.states = {g: unflatten_state({name: parts[g].to(self.lm.device) for name, parts in groups.items()})
                       for g in range(self.parts)}

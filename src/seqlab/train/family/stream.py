"""The language-model family: one token stream read by truncated BPTT."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import torch

from seqlab.config import Config, ConfigError
from seqlab.data import load_sentence_splits, resolve_data_dir
from seqlab.data.batching import BatchStream
from seqlab.data.prepared import CHUNK_ROWS, IDS, Counted, Preparation, open_prepared, prepared_sections
from seqlab.data.splits import streamed_sentences
from seqlab.data.stream import Stream, TbpttBatches
from seqlab.loss import token_nll_sum
from seqlab.model import num_parameters
from seqlab.model.kneser_ney import KneserNey
from seqlab.model.lm import LMConfig, LMState, flatten_state, unflatten_state
from seqlab.model.transformer_lm import TransformerLMConfig
from seqlab.predictors.language_model import LanguageModel, sentence_pieces
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.specials import EOS
from seqlab.tokenizer import Tokenizer
from seqlab.train.family.base import ngrams_beside, prepared_tokenizers


class StreamLM:
    """A language model over one token stream (seed 002 ch. 5): the training sentences, each followed by
    ``<eos>``, cut by ``data.stream.TbpttBatches`` into ``train.streams`` rows of ``train.time_size`` steps;
    the RNN's state is carried from batch to batch, detached (truncated BPTT), and reset when an epoch starts
    unless ``train.carry_state`` (a causal Transformer carries nothing: its context is its window).

    With ``parts`` > 1 (processes × ``train.accumulate``) each step's rows are cut into ``parts`` groups, one
    batch each (``[k, group]``): a group's rows carry their own state, so a step's batches may run in any
    process, and their mean loss is the whole step's."""

    unit = "tokens"

    def __init__(self, config: Config, lm: LanguageModel, train_stream: Stream, valid: Sequence[str],
                 parts: int = 1, share: range | None = None) -> None:
        self.config = config
        self.lm = lm
        self.model = lm.model
        self.tbptt = TbpttBatches(train_stream, config.train.streams, config.train.time_size)  # K batches of (B, T)
        self.valid = valid
        self.parts = parts
        self.share = share or range(parts)  # the groups this process trains
        self.rows = config.train.streams // parts  # rows per group
        self.states: dict[int, LMState] = {}  # each group's state

    @classmethod
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool,
              parts: int = 1, share: range | None = None, runtime: Runtime | None = None) -> StreamLM:
        """Read the sentences, learn the tokenizer (or read it back on resume), build the model, make the stream;
        or, with ``data.prepared``, take the tokenizer and the stream from that directory."""
        assert isinstance(config.model, LMConfig | TransformerLMConfig)
        if config.train.streams % parts:
            raise ConfigError(f"train.streams ({config.train.streams}) must be a multiple of the processes × "
                              f"train.accumulate ({parts}): each takes the same number of rows")
        if config.data.prepared is not None:
            return cls._from_prepared(config, run, resume, runtime, parts, share)
        splits = load_sentence_splits(config.data, resolve_data_dir(data_dir))
        if resume:
            tokenizer, _ = run.tokenizers()
        else:
            tokenizer = Tokenizer.train(splits["train"], config.tokens.source)
            run.save_tokenizers(tokenizer, tokenizer)
        lm = LanguageModel(LanguageModel.build(config, tokenizer.vocab_size), tokenizer, config, runtime)
        stream = lm.stream(splits["train"])
        _kneser_ney(config, run, resume, lm, stream)
        return cls(config, lm, stream, splits["valid"], parts, share)

    @classmethod
    def _from_prepared(cls, config: Config, run: RunDir, resume: bool, runtime: Runtime | None, parts: int,
                       share: range | None) -> StreamLM:
        """The tokenizer, the training stream read from the shards (a chunk open for each row and one more: a
        batch's rows read far apart) and the valid sentences of ``data.prepared``."""
        prepared = open_prepared(cast(str, config.data.prepared), prepared_sections(config))
        tokenizer, _ = prepared_tokenizers(prepared, run, resume)
        lm = LanguageModel(LanguageModel.build(config, tokenizer.vocab_size), tokenizer, config, runtime)
        stream = prepared.stream("train", "ids", EOS, config.train.streams + 1)
        _kneser_ney(config, run, resume, lm, stream)
        return cls(config, lm, stream, prepared.texts("valid", "text"), parts, share)

    @classmethod
    def prepare(cls, config: Config, data_dir: str | Path | None, out: Path, progress: bool = True,
                chunk_rows: int = CHUNK_ROWS, workers: int = 1) -> dict[str, Any]:
        """``seqlab data prepare``: the sentences of every split, each as its ids and ``<eos>`` (the pieces of
        ``LanguageModel.stream``, which the training stream reads after one ``<eos>``) and its text."""
        where = resolve_data_dir(data_dir)
        splits = load_sentence_splits(config.data, where)
        # a training file is read at each pass, never held whole
        train = Counted(streamed_sentences(config.data, where) or splits["train"], "sentences", progress)
        tokenizer = Tokenizer.train(train, config.tokens.source)

        def encode(sentences: list[str], name: str) -> dict[str, list[Any]]:
            return {"ids": sentence_pieces(tokenizer, sentences), "text": sentences}

        preparation = Preparation({"source": tokenizer.to_json()}, {"ids": IDS, "text": pa.string()}, encode,
                                  "sentences")
        return preparation.write(config, out, train, splits, chunk_rows, progress, workers)

    def use(self, runtime: Runtime) -> None:
        self.lm.runtime = runtime

    def describe(self) -> str:
        batches, rows, steps = len(self.tbptt), self.config.train.streams, self.config.train.time_size
        return (f"a stream of {batches * rows * steps:,} train tokens in {batches} batches of {rows} × {steps}; "
                f"{len(self.valid)} valid sentences; vocab {self.lm.tokenizer.vocab_size}; "
                f"{num_parameters(self.model):,} parameters")

    def batches(self, epoch: int) -> list[BatchStream]:
        """``[k, group]`` in stream order (each row continues the last), a step's groups together: one stream."""
        return [[np.array([k, g]) for k in range(len(self.tbptt)) for g in range(self.parts)]]

    def batch(self, indices: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, bool]:
        """Inputs and targets (B / parts, T) of step ``indices[0]``'s row group ``indices[1]``, and whether its
        rows start from zeros: at the stream's start (an epoch's), unless ``train.carry_state``."""
        k, rows = int(indices[0]), slice(int(indices[1]) * self.rows, (int(indices[1]) + 1) * self.rows)
        fresh = k == 0 and not self.config.train.carry_state
        inputs, targets = self.tbptt.rows(k, rows)  # (B / parts, T) each
        return torch.from_numpy(inputs), torch.from_numpy(targets), fresh

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


def _kneser_ney(config: Config, run: RunDir, resume: bool, lm: LanguageModel, stream: Stream) -> None:
    """``model.ngrams``' Kneser-Ney model on ``lm``: counted from the training stream and saved before the first
    epoch, so that every validation interpolates with it; read back on resume."""
    assert isinstance(config.model, LMConfig | TransformerLMConfig)
    cfg = config.model.ngrams
    if cfg is not None:
        lm.ngrams = ngrams_beside(run, resume, KneserNey, cfg,
                                  lambda: KneserNey.fit(cfg, np.asarray(stream[0:len(stream)]), lm.tokenizer.vocab_size))

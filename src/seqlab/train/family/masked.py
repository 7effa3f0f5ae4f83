"""BERT's pretraining family: masked tokens, optionally next sentences."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import torch

from seqlab.config import Config
from seqlab.data import Splits, load_sentence_splits, load_splits, resolve_data_dir
from seqlab.data.batching import BatchStream
from seqlab.data.prepared import CHUNK_ROWS, IDS, Counted, Preparation, open_prepared, prepared_sections
from seqlab.data.splits import streamed_sentences
from seqlab.model import num_parameters
from seqlab.model.bert import BertConfig
from seqlab.predictors.masked_lm import Examples, MaskedLanguageModel
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.tokenizer import Tokenizer
from seqlab.train.family.base import epoch_batches, prepared_tokenizers


class MaskedLM:
    """BERT's pretraining (seed 002 §10.1, S99–S100): every training sentence as ``<sos> A <eos>`` (or, with
    ``model.next_sentence``, every pair as ``<sos> A <eos> B <eos>`` whose B is another pair's half of the time,
    drawn anew each epoch); each batch's masks drawn from (seed, epoch, the batch's rows), so a resumed run
    draws the same ones; the loss is the cross-entropy of the masked tokens (plus that of IsNext/NotNext,
    per pair), validated on masks drawn from a fixed seed."""

    unit = "tokens"  # the masked tokens the loss predicts

    def __init__(self, config: Config, mlm: MaskedLanguageModel, examples: Callable[[int], Examples],
                 valid: Examples) -> None:
        assert isinstance(config.model, BertConfig)
        self.config = config
        self.bert: BertConfig = config.model
        self.mlm = mlm
        self.model = mlm.model
        self.make_examples = examples  # an epoch -> its training inputs
        self.valid = valid
        self.epoch = 1
        self.examples = examples(1)  # the inputs of the epoch ``batches`` was last asked for

    @classmethod
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool,
              parts: int = 1, share: range | None = None, runtime: Runtime | None = None) -> MaskedLM:
        """Read the sentences (or pairs), learn the tokenizer with <mask> (or read it back), build BERT; or, with
        ``data.prepared``, take the tokenizer and the sentences' inputs from that directory."""
        assert isinstance(config.model, BertConfig)
        if config.data.prepared is not None:
            return cls._from_prepared(config, run, resume, runtime)
        splits = _splits(config, resolve_data_dir(data_dir))
        if resume:
            tokenizer, _ = run.tokenizers()
        else:
            tokenizer = Tokenizer.train(_texts(splits["train"]), config.tokens.source, mask=True)
            run.save_tokenizers(tokenizer, tokenizer)
        mlm = MaskedLanguageModel(MaskedLanguageModel.build(config, tokenizer.vocab_size), tokenizer, config,
                                  runtime)
        train = splits["train"]
        if config.model.next_sentence:  # the pairs with each epoch's next sentences
            def examples(epoch: int) -> Examples:
                return mlm.examples(train, np.random.default_rng([config.seed, epoch]))
        else:
            sentences = mlm.sentences(cast(list[str], train))

            def examples(epoch: int) -> Examples:  # the same inputs every epoch
                return sentences
        return cls(config, mlm, examples, mlm.examples(splits["valid"], np.random.default_rng(0)))

    @classmethod
    def _from_prepared(cls, config: Config, run: RunDir, resume: bool, runtime: Runtime | None) -> MaskedLM:
        """The tokenizer and the sentences' inputs of ``data.prepared`` (next-sentence prediction is refused there
        by the config: its pairs are redrawn every epoch across the whole split)."""
        prepared = open_prepared(cast(str, config.data.prepared), prepared_sections(config))
        tokenizer, _ = prepared_tokenizers(prepared, run, resume)
        mlm = MaskedLanguageModel(MaskedLanguageModel.build(config, tokenizer.vocab_size), tokenizer, config,
                                  runtime)
        window = config.train.batch_window
        train, valid = (prepared.ids(name, "ids", window) for name in ("train", "valid"))
        sentences = Examples(train, None)
        return cls(config, mlm, lambda _: sentences, Examples(valid, None))

    @classmethod
    def prepare(cls, config: Config, data_dir: str | Path | None, out: Path, progress: bool = True,
                chunk_rows: int = CHUNK_ROWS, workers: int = 1) -> dict[str, Any]:
        """``seqlab data prepare``: every split's sentences as BERT reads them (``<sos>`` + ids + ``<eos>``, cut)
        and their texts; the tokenizer learnt with ``<mask>``."""
        assert isinstance(config.model, BertConfig) and not config.model.next_sentence
        where = resolve_data_dir(data_dir)
        splits = load_sentence_splits(config.data, where)
        # a training file is read at each pass, never held whole
        train = Counted(streamed_sentences(config.data, where) or splits["train"], "sentences", progress)
        tokenizer = Tokenizer.train(train, config.tokens.source, mask=True)
        with torch.device("meta"):  # the model is never run: its predictor encodes
            mlm = MaskedLanguageModel(MaskedLanguageModel.build(config, tokenizer.vocab_size), tokenizer, config,
                                      Runtime())

        def encode(sentences: list[str], name: str) -> dict[str, list[Any]]:
            return {"ids": mlm.sentence_ids(sentences), "text": sentences}

        preparation = Preparation({"source": tokenizer.to_json()}, {"ids": IDS, "text": pa.string()}, encode,
                                  "sentences")
        return preparation.write(config, out, train, splits, chunk_rows, progress, workers)

    def use(self, runtime: Runtime) -> None:
        self.mlm.runtime = runtime

    def describe(self) -> str:
        what = "pairs (next-sentence prediction)" if self.bert.next_sentence else "sentences"
        return (f"{len(self.examples.ids)} train / {len(self.valid.ids)} valid {what}; vocab {self.mlm.tokenizer.vocab_size} "
                f"(<mask> at 4); {num_parameters(self.model):,} parameters")

    def batches(self, epoch: int) -> list[BatchStream]:
        """That epoch's batches; also makes that epoch's inputs (next sentences) the ones ``loss`` reads."""
        if epoch != self.epoch and self.bert.next_sentence:
            self.examples = self.make_examples(epoch)
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


def _splits(config: Config, data_dir: Path) -> Splits[str] | Splits[tuple[str, str]]:
    """The sentences, or with next-sentence prediction the pairs."""
    assert isinstance(config.model, BertConfig)
    if config.model.next_sentence:
        return load_splits(config.data, data_dir)
    return load_sentence_splits(config.data, data_dir)


def _texts(train: Sequence[str] | Sequence[tuple[str, str]]) -> Iterator[str]:
    """The texts the tokenizer learns from: the sentences, or both halves of every pair."""
    for item in train:
        yield from (item,) if isinstance(item, str) else item

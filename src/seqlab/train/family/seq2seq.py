"""The encoder-decoder family: source/target pairs, teacher forcing, validation by decoding."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import torch

from seqlab.config import Config
from seqlab.data import Pair, load_splits, resolve_data_dir
from seqlab.data.batching import Batch, BatchStream, collate
from seqlab.data.prepared import CHUNK_ROWS, IDS, Counted, Preparation, open_prepared, prepared_sections
from seqlab.data.splits import streamed_train
from seqlab.decoding.options import GREEDY
from seqlab.evaluate import EncodedSplit, evaluate
from seqlab.loss import token_nll_sum
from seqlab.model import build_model, num_parameters
from seqlab.predictors.translator import Translator
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.tokenizer import Tokenizer, learn_tokenizers
from seqlab.train.family.base import epoch_batches, prepared_tokenizers


class Transduction:
    """Source/target pairs, teacher forcing (seed 000's ``train_step``), validation by ``evaluate``."""

    unit = "tokens"

    def __init__(self, config: Config, translator: Translator, train_set: EncodedSplit, valid_set: EncodedSplit,
                 parts: int = 1) -> None:
        self.config = config
        self.parts = parts  # batches a step: a prepared split is dealt to them (``windowed_batches``)
        self.translator = translator
        self.model = translator.model
        self.train_set = train_set
        self.valid_set = valid_set

    @classmethod
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool,
              parts: int = 1, share: range | None = None, runtime: Runtime | None = None) -> Transduction:
        """Read the splits, learn the tokenizers (or read them back on resume), build the model, encode the data;
        or, with ``data.prepared``, take the tokenizers and the encoded splits from that directory."""
        if config.data.prepared is not None:
            return cls._from_prepared(config, run, resume, runtime, parts, len(share or range(parts)))
        splits = load_splits(config.data, resolve_data_dir(data_dir))
        if resume:
            source, target = run.tokenizers()
        else:
            source, target = _learn_tokenizers(config, splits["train"])
            run.save_tokenizers(source, target)
        translator = Translator(build_model(config.model, source.vocab_size, target.vocab_size), source, target, config,
                                runtime)
        return cls(config, translator, EncodedSplit.build(translator, splits["train"], "train"),
                   EncodedSplit.build(translator, splits["valid"], "valid"), parts)

    @classmethod
    def _from_prepared(cls, config: Config, run: RunDir, resume: bool, runtime: Runtime | None, parts: int,
                       own: int) -> Transduction:
        """The tokenizers and splits of ``data.prepared``; a window of chunks held for each of the ``own`` parts
        of a step this process trains (of ``parts``)."""
        prepared = open_prepared(cast(str, config.data.prepared), prepared_sections(config))
        source, target = prepared_tokenizers(prepared, run, resume)
        translator = Translator(build_model(config.model, source.vocab_size, target.vocab_size), source, target, config,
                                runtime)
        window = config.train.batch_window
        return cls(config, translator, EncodedSplit.prepared(translator, prepared, "train", window * own),
                   EncodedSplit.prepared(translator, prepared, "valid", window), parts)

    @classmethod
    def prepare(cls, config: Config, data_dir: str | Path | None, out: Path, progress: bool = True,
                chunk_rows: int = CHUNK_ROWS, workers: int = 1) -> dict[str, Any]:
        """``seqlab data prepare``: read the splits, learn the tokenizers and write both, with every split's ids and
        texts as ``build`` encodes them, in record batches of ``chunk_rows``, into the new directory ``out``;
        returns its manifest."""
        where = resolve_data_dir(data_dir)
        splits = load_splits(config.data, where)  # each split read when asked for
        # training files are read at each pass, never held whole
        train = Counted(streamed_train(config.data, where) or splits["train"], "pairs", progress)
        source, target = _learn_tokenizers(config, train)
        with torch.device("meta"):  # the translator encodes; its model is never run
            model = build_model(config.model, source.vocab_size, target.vocab_size)
        translator = Translator(model, source, target, config, Runtime())

        def encode(pairs: list[Pair], name: str) -> dict[str, list[Any]]:
            sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
            return {"src": translator.encode_sources(sources, name), "trg": translator.encode_targets(targets, name),
                    "source": sources, "target": targets}

        preparation = Preparation({"source": source.to_json(), "target": target.to_json()},
                                  {"src": IDS, "trg": IDS, "source": pa.string(), "target": pa.string()}, encode, "pairs")
        return preparation.write(config, out, train, splits, chunk_rows, progress, workers)

    def use(self, runtime: Runtime) -> None:
        self.translator.runtime = runtime

    def describe(self) -> str:
        t = self.translator
        return (f"{len(self.train_set.src)} train / {len(self.valid_set.src)} valid pairs; vocab {t.source.vocab_size} "
                f"→ {t.target.vocab_size}; {num_parameters(self.model):,} parameters")

    def batches(self, epoch: int) -> list[BatchStream]:
        return epoch_batches(self.config, epoch, self.train_set.src, self.train_set.trg, self.parts)

    def batch(self, indices: np.ndarray) -> Batch:
        """The padded batch of these training pairs."""
        return collate([self.train_set.src[i] for i in indices], [self.train_set.trg[i] for i in indices],
                       self.translator.target_eos)

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        batch = self.batch(indices).to(self.translator.device)
        with self.translator.autocast():
            logits = self.model(batch.src, batch.trg_in)  # (batch, trg_len, vocab)
        return token_nll_sum(logits, batch.trg_out, self.config.train.label_smoothing), self.count(batch)

    def count(self, batch: Batch) -> int:
        """What a batch's summed loss is divided by: its target tokens, or with ``train.loss_average: all``
        all its target positions, padding included (S93)."""
        return batch.trg_out.numel() if self.config.train.loss_average == "all" else batch.num_target_tokens

    def validate(self) -> dict[str, Any]:
        """The valid split's scores, decoded greedily whatever search ``eval.beam`` gives the finished run: the
        epochs are compared on the search that is fastest to run after every epoch."""
        return evaluate(self.translator, self.valid_set, self.config.train.batch_tokens, self.config.eval.valid_limit,
                        GREEDY)

    @staticmethod
    def summary(valid: dict[str, Any]) -> str:
        return (f"valid loss {valid['loss']:.4f}, ppl {valid['perplexity']:.3f}, exact {valid['exact_match']:.2f}%, "
                f"BLEU {valid['bleu']:.2f}")

    def carried(self) -> dict[str, torch.Tensor]:
        return {}  # every batch starts afresh

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        pass


def _learn_tokenizers(config: Config, train: Iterable[Pair]) -> tuple[Tokenizer, Tokenizer]:
    data = config.data
    return learn_tokenizers(train, config.tokens, (data.source_width is not None, data.target_width is not None))

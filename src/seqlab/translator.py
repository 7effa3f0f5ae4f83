"""A trained model with its tokenizers: text in, text out.

This is the one tokenize → decode → detokenize path, shared by training-time
validation, ``seqlab eval``, ``seqlab translate`` and ``seqlab.load(...)``, so
the same input always gives the same output.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from seqlab.config import Config
from seqlab.data.batching import pad, source_ids
from seqlab.decoding import greedy_decode
from seqlab.model import Seq2seq, build_model
from seqlab.tokenizer import Tokenizer
from seqlab.train import checkpoint

log = logging.getLogger("seqlab")


class Translator:
    def __init__(self, model: Seq2seq, source: Tokenizer, target: Tokenizer, config: Config) -> None:
        self.model = model
        self.source = source
        self.target = target
        self.config = config

    def autocast(self) -> contextlib.AbstractContextManager:
        """bf16 autocast when the run was configured for it (``train.precision``)."""
        enabled = self.config.train.precision == "bf16"
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled)

    def encode_sources(self, texts: Sequence[str], what: str = "input") -> list[list[int]]:
        """Token ids + <eos>, cut to ``data.max_source_length`` (a warning counts the cuts)."""
        limit = self.config.data.max_source_length - 1  # room for <eos>
        return [source_ids(ids) for ids in _truncate(self.source.encode(texts), limit, f"{what} sources")]

    def encode_targets(self, texts: Sequence[str], what: str = "input") -> list[list[int]]:
        """Token ids, cut to ``data.max_target_length - 1`` (room for <sos>/<eos>)."""
        return _truncate(self.target.encode(texts), self.config.data.max_target_length - 1, f"{what} targets")

    def normalize_target(self, text: str) -> str:
        """A reference as the model can produce it (Unicode NFC, lower-cased if so configured)."""
        return self.target.normalize(text)

    def translate(self, texts: Sequence[str]) -> list[str]:
        """Greedy translations, decoded in batches of similar-length sentences."""
        if isinstance(texts, str):
            raise TypeError("translate() takes a list of strings")
        return self.translate_ids(self.encode_sources(texts))

    def translate_ids(self, ids: Sequence[Sequence[int]]) -> list[str]:
        """Like ``translate`` for sources already encoded by ``encode_sources``."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        outputs: list[list[int]] = [[] for _ in ids]
        for chunk in _chunks(order, self.config.eval.batch_size):
            for index, out in zip(chunk, self.decode_ids([ids[i] for i in chunk])):
                outputs[index] = out
        return self.target.decode(outputs)

    def decode_ids(self, src: Sequence[Sequence[int]]) -> list[list[int]]:
        max_length = self.config.eval.max_output_length  # the config checks it fits the model
        was_training = self.model.training
        self.model.eval()
        try:
            with self.autocast():
                return greedy_decode(self.model, pad(src), max_length)
        finally:
            self.model.train(was_training)


def load(run_dir: str | Path) -> Translator:
    """Load a trained run directory (``seqlab train ... --out RUN_DIR``) for translation."""
    run_dir = Path(run_dir)
    config = checkpoint.load_run_config(run_dir)
    source = Tokenizer.from_json((run_dir / checkpoint.SOURCE_TOKENIZER).read_text(encoding="utf-8"))
    target = Tokenizer.from_json((run_dir / checkpoint.TARGET_TOKENIZER).read_text(encoding="utf-8"))
    model = build_model(config.model, source.vocab_size, target.vocab_size)
    checkpoint.load_model_weights(run_dir, model)
    return Translator(model.eval(), source, target, config)


def _truncate(seqs: list[list[int]], limit: int, what: str) -> list[list[int]]:
    cut = sum(len(s) > limit for s in seqs)
    if cut:
        log.warning("%d of %d %s are longer than %d tokens and were truncated", cut, len(seqs), what, limit)
    return [s[:limit] for s in seqs]


def _chunks(items: list[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]

"""Train/valid/test splits: carved out of one corpus by a seeded shuffle, or read from explicit files."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TypeVar, cast

import numpy as np

from seqlab.config import Corpus, DataConfig, LinesCorpus, SplitConfig, SquadCorpus
from seqlab.data.corpus import BadLines, DataError, Pair, locate, read_corpus, read_sentences
from seqlab.data.squad import Question, read_squad

Item = TypeVar("Item")


def _size(value: float, n: int, name: str) -> int:
    """How many of ``n`` pairs ``data.split.<name>`` asks for: a count if >= 1, else a fraction (rounded down)."""
    if value >= 1:
        if not float(value).is_integer():
            raise DataError(f"data.split.{name}: {value} is a count (>= 1), so it must be a whole number")
        return int(value)
    return math.floor(round(value * n, 9))  # round first: 0.29 * 100 is 28.999999999999996


def split_pairs(pairs: list[Item], split: SplitConfig) -> dict[str, list[Item]]:
    """Shuffle indices with ``RandomState(split.seed)``; test is the last ``test``, valid the ``valid`` before it.

    ``{valid: 0, test: 5000, seed: 1984}`` on the book's date.txt is the book's split
    (``numpy.random.seed(1984); numpy.random.shuffle(indices)``, 45,000 train, 5,000 test).
    """
    n = len(pairs)
    n_valid, n_test = _size(split.valid, n, "valid"), _size(split.test, n, "test")
    n_train = n - n_valid - n_test
    if n_train <= 0:
        raise DataError(
            f"data.split: valid {n_valid} + test {n_test} pairs leave no training data from a corpus of {n} pairs"
        )
    idx = np.arange(n)
    np.random.RandomState(split.seed).shuffle(idx)
    parts = {"train": idx[:n_train], "valid": idx[n_train:n - n_test], "test": idx[n - n_test:]}
    return {name: [pairs[i] for i in part] for name, part in parts.items()}


def load_splits(cfg: DataConfig, data_dir: Path) -> dict[str, list[Pair]]:
    """``{"train", "valid", "test"}`` pairs of a data config; test is ``[]`` when explicit files name none."""
    if cfg.corpus is not None:
        return split_pairs(read_corpus(cast(Corpus, cfg.corpus), data_dir, cfg.skip_bad_lines), cfg.split)
    assert cfg.train is not None and cfg.valid is not None  # DataConfig validates this
    return {
        "train": read_corpus(cast(Corpus, cfg.train), data_dir, cfg.skip_bad_lines),
        "valid": read_corpus(cast(Corpus, cfg.valid), data_dir, cfg.skip_bad_lines),
        "test": read_corpus(cast(Corpus, cfg.test), data_dir, cfg.skip_bad_lines) if cfg.test is not None else [],
    }


def load_sentence_splits(cfg: DataConfig, data_dir: Path) -> dict[str, list[str]]:
    """``{"train", "valid", "test"}`` sentences of a data config, for a language model: the lines of a ``lines``
    corpus, or both sides of a pair corpus (a pair stays in one split, its source then its target)."""
    if cfg.corpus is not None and not isinstance(cfg.corpus, LinesCorpus):
        return {name: [s for pair in pairs for s in pair]
                for name, pairs in split_pairs(read_corpus(cfg.corpus, data_dir, cfg.skip_bad_lines), cfg.split).items()}
    if cfg.corpus is not None:
        return split_pairs(read_sentences(cfg.corpus, data_dir, cfg.skip_bad_lines), cfg.split)
    assert cfg.train is not None and cfg.valid is not None  # DataConfig validates this
    return {
        "train": read_sentences(cfg.train, data_dir, cfg.skip_bad_lines),
        "valid": read_sentences(cfg.valid, data_dir, cfg.skip_bad_lines),
        "test": read_sentences(cfg.test, data_dir, cfg.skip_bad_lines) if cfg.test is not None else [],
    }


def read_questions(spec: SquadCorpus, data_dir: Path, skip_bad_lines: bool = False) -> list[Question]:
    """The questions of one SQuAD file; none is an error."""
    path = locate(spec.path, data_dir)
    bad = BadLines(skip_bad_lines)
    questions = read_squad(path, bad)
    bad.warn()
    if not questions:
        raise DataError(f"{path}: no questions" + (f" (all {bad.count} were bad, skipped)" if bad.count else ""))
    return questions


def load_question_splits(cfg: DataConfig, data_dir: Path) -> dict[str, list[Question]]:
    """``{"train", "valid", "test"}`` questions of a span-extraction data config: one SQuAD file split by
    ``data.split`` (by question, so a context's questions may fall in different splits; give explicit files to
    keep contexts apart), or SQuAD's own train and dev files."""
    if cfg.corpus is not None:
        return split_pairs(read_questions(cast(SquadCorpus, cfg.corpus), data_dir, cfg.skip_bad_lines), cfg.split)
    assert cfg.train is not None and cfg.valid is not None  # DataConfig validates this

    def read(spec: object) -> list[Question]:
        return read_questions(cast(SquadCorpus, spec), data_dir, cfg.skip_bad_lines)

    return {"train": read(cfg.train), "valid": read(cfg.valid), "test": read(cfg.test) if cfg.test is not None else []}

"""Train/valid/test splits: carved out of one corpus by a seeded shuffle, or read from explicit files.

Splits are read lazily, a split when it is first asked for, so training never opens a test file. In a *selection
run* (``SEQLAB_SELECTION=1`` in the environment, which the benchmarks that choose a configuration set for themselves
and every process they start) the test split is withheld: its file is never opened, its share of a shuffled corpus
is dropped as the corpus is split, and asking for it in any way raises :class:`WithheldSplit`.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

import numpy as np

from seqlab.corpora import CleanConfig, Corpus, DataConfig, LinesCorpus, SplitConfig, SquadCorpus, TaskCorpus, TextCorpus
from seqlab.data.clean import Cleaned, cleaned
from seqlab.data.corpus import (
    BadLines,
    CorpusStream,
    DataError,
    Pair,
    iter_sentences,
    locate,
    read_corpus,
    read_sentences,
)
from seqlab.data.squad import Question, read_squad

Item = TypeVar("Item")
Other = TypeVar("Other")

SPLITS = ("train", "valid", "test")
SELECTION_ENV = "SEQLAB_SELECTION"


class WithheldSplit(DataError):
    """The test split was asked for in a selection run, where choices are made on valid alone."""


def selection_run() -> bool:
    """Whether this process is part of a selection run (``SEQLAB_SELECTION=1``): then test is withheld."""
    return os.environ.get(SELECTION_ENV, "") not in ("", "0")


class Splits(Mapping[str, list[Item]]):
    """A data config's ``train``, ``valid`` and ``test`` items, each read when it is first asked for.

    ``read(name)`` reads one split; a split that a config has no data for is ``[]``. Every way in (``[]``,
    ``get``, ``items()``, ``values()``) goes through :meth:`__getitem__`, which refuses ``test`` in a selection run.
    """

    def __init__(self, read: Callable[[str], list[Item]]) -> None:
        self._read = read
        self._items: dict[str, list[Item]] = {}

    def __getitem__(self, name: str) -> list[Item]:
        if name not in SPLITS:
            raise KeyError(name)
        if name == "test" and selection_run():
            raise WithheldSplit(f"the test split is withheld in a selection run ({SELECTION_ENV}=1): "
                                "choices are made on valid")
        if name not in self._items:
            self._items[name] = self._read(name)
        return self._items[name]

    def require(self, name: str) -> list[Item]:
        """The split ``name``; a ValueError where the config has no data for it (explicit files without a test
        file)."""
        items = self[name]
        if not items:
            raise ValueError(f"the run's data has no {name!r} split (splits: train, valid, test)")
        return items

    def __iter__(self) -> Iterator[str]:
        return iter(SPLITS)

    def __len__(self) -> int:
        return len(SPLITS)

    def map(self, change: Callable[[list[Item]], list[Other]]) -> Splits[Other]:
        """The same splits with ``change`` applied to each when it is read (still lazily, still guarded)."""
        return Splits(lambda name: change(self[name]))


def _size(value: float, n: int, name: str) -> int:
    """How many of ``n`` pairs ``data.split.<name>`` asks for: a count if >= 1, else a fraction (rounded down)."""
    if value >= 1:
        if not float(value).is_integer():
            raise DataError(f"data.split.{name}: {value} is a count (>= 1), so it must be a whole number")
        return int(value)
    return math.floor(round(value * n, 9))  # round first: 0.29 * 100 is 28.999999999999996


def split_pairs(items: list[Item], split: SplitConfig,
                source: Callable[[Item], str] | None = None) -> dict[str, list[Item]]:
    """Shuffle indices with ``RandomState(split.seed)``; test is the last ``test``, valid the ``valid`` before it.

    ``{valid: 0, test: 5000, seed: 1984}`` on the book's date.txt is the book's split
    (``numpy.random.seed(1984); numpy.random.shuffle(indices)``, 45,000 train, 5,000 test). With ``split.by:
    source`` the items of one ``source`` text are put together where the first of them fell, and a cut inside
    such a group moves to its start, so the whole group goes to the later split. With ``split.by: hash`` each
    item goes where ``hashed_split`` sends its source, in the corpus's order. In a selection run the test
    items are not taken out of the corpus at all (the dict has no ``test``).
    """
    if split.by == "hash":
        assert source is not None, "split.by hash needs the items' source text"
        hashed: dict[str, list[Item]] = {name: [] for name in SPLITS}
        for item in items:  # each item's hash once
            hashed[hashed_split(source(item), split)].append(item)
        if not hashed["train"]:
            raise DataError(f"data.split: by hash, none of the corpus's {len(items)} items falls in train")
        if selection_run():
            del hashed["test"]
        return hashed
    n = len(items)
    n_valid, n_test = _size(split.valid, n, "valid"), _size(split.test, n, "test")
    idx = np.arange(n)
    np.random.RandomState(split.seed).shuffle(idx)
    cuts = [n - n_valid - n_test, n - n_test]
    if split.by == "source":
        assert source is not None, "split.by source needs the items' source text"
        keys = [source(item) for item in items]
        idx = _grouped(idx, keys)
        cuts = [_group_start(cut, idx, keys) for cut in cuts]
    if cuts[0] <= 0:
        raise DataError(
            f"data.split: valid {n_valid} + test {n_test} items leave no training data from a corpus of {n} items"
        )
    parts = {"train": idx[:cuts[0]], "valid": idx[cuts[0]:cuts[1]], "test": idx[cuts[1]:]}
    if selection_run():
        del parts["test"]
    return {name: [items[i] for i in part] for name, part in parts.items()}


def hashed_split(source: str, split: SplitConfig) -> str:
    """The split of an item whose source text is ``source`` by ``split.by: hash``: u, the first 8 bytes of
    BLAKE2b(seed, source) as a fraction of 2^64, is uniform in [0, 1); test below ``split.test``, valid below
    ``split.test + split.valid``, else train. The same text always goes to the same split, whatever else the corpus
    holds."""
    digest = hashlib.blake2b(source.encode(), digest_size=8, key=str(split.seed).encode()).digest()
    u = int.from_bytes(digest, "big") / 2**64
    return "test" if u < split.test else "valid" if u < split.test + split.valid else "train"


def _grouped(order: np.ndarray, keys: list[str]) -> np.ndarray:
    """``order`` with the items of each key together, at the place of the key's first item (stable within)."""
    first: dict[str, int] = {}
    for rank, i in enumerate(order.tolist()):
        first.setdefault(keys[i], rank)
    return np.array(sorted(order.tolist(), key=lambda i: first[keys[i]]), dtype=order.dtype)


def _group_start(cut: int, order: np.ndarray, keys: list[str]) -> int:
    """``cut`` moved back to the start of the group it falls in (unchanged at a group's boundary)."""
    while 0 < cut < len(order) and keys[order[cut - 1]] == keys[order[cut]]:
        cut -= 1
    return cut


def _shuffled(read: Callable[[], list[Item]], split: SplitConfig, source: Callable[[Item], str]) -> Splits[Item]:
    """The splits of one corpus cut by ``data.split`` (``source``: an item's source text, for ``split.by: source``):
    the corpus is read (and cut) once, when a split is asked for."""
    parts: dict[str, list[Item]] = {}

    def part(name: str) -> list[Item]:
        if not parts:
            parts.update(split_pairs(read(), split, source))
        return parts[name]

    return Splits(part)


def _explicit(cfg: DataConfig, read: Callable[[object], list[Item]]) -> Splits[Item]:
    """The splits of explicit ``data.train`` / ``valid`` / ``test`` files, each file opened when its split is asked
    for; no ``data.test``: test is ``[]``."""
    assert cfg.train is not None and cfg.valid is not None  # DataConfig validates this
    specs = {"train": cfg.train, "valid": cfg.valid, "test": cfg.test}
    return Splits(lambda name: [] if specs[name] is None else read(specs[name]))


def load_splits(cfg: DataConfig, data_dir: Path) -> Splits[Pair]:
    """``{"train", "valid", "test"}`` pairs of a data config, the training pairs cleaned as ``data.clean`` says;
    test is ``[]`` when explicit files name none."""
    def read(spec: object) -> list[Pair]:
        return read_corpus(cast(Corpus, spec), data_dir, cfg.skip_bad_lines)

    if cfg.corpus is None:
        splits = _explicit(cfg, read)
    elif cfg.split.by == "hash" and _streams(cfg.corpus):  # each split read in a pass of its own, never all at once
        splits = Splits(lambda name: list(HashedPart(CorpusStream(cast(Corpus, cfg.corpus), data_dir,
                                                                  cfg.skip_bad_lines), cfg.split, name)))
    else:
        splits = _shuffled(lambda: read(cfg.corpus), cfg.split, lambda pair: pair[0])
    if cfg.clean == CleanConfig():
        return splits
    return Splits(lambda name: cleaned(splits[name], cfg.clean) if name == "train" else splits[name])


def streamed_train(cfg: DataConfig, data_dir: Path) -> Iterable[Pair] | None:
    """The training pairs of explicit ``data.train`` files, or of a corpus split by hash, as they are read from the
    files at each pass, never held whole (``seqlab data prepare``), cleaned as they are read (``data.clean``); None
    for a corpus shuffled into splits, or generated, which is read whole."""
    spec = cfg.train if cfg.corpus is None else cfg.corpus if cfg.split.by == "hash" else None
    if spec is None or not _streams(spec):
        return None
    stream: Iterable[Pair] = CorpusStream(cast(Corpus, spec), data_dir, cfg.skip_bad_lines)
    if cfg.corpus is not None:
        stream = HashedPart(stream, cfg.split, "train")
    return stream if cfg.clean == CleanConfig() else Cleaned(stream, cfg.clean)


def streamed_sentences(cfg: DataConfig, data_dir: Path) -> Iterable[str] | None:
    """The training sentences of an explicit ``data.train`` file as ``load_sentence_splits`` reads them, read from
    the file at each pass, never held whole (``seqlab data prepare``); None for a corpus cut into splits, or
    generated, which is read whole."""
    if cfg.corpus is not None or cfg.train is None or isinstance(cfg.train, (TaskCorpus, SquadCorpus)):
        return None
    return SentenceStream(cfg.train, data_dir, cfg.skip_bad_lines)


@dataclass(frozen=True)
class SentenceStream(Iterable[str]):
    """``iter_sentences`` of a file corpus afresh at each pass."""

    spec: TextCorpus
    data_dir: Path
    skip_bad_lines: bool

    def __iter__(self) -> Iterator[str]:
        return iter_sentences(self.spec, self.data_dir, self.skip_bad_lines)


def _streams(spec: TextCorpus) -> bool:
    """Whether the corpus is pairs read from files, which ``CorpusStream`` reads at each pass."""
    return not isinstance(spec, (TaskCorpus, LinesCorpus, SquadCorpus))


@dataclass(frozen=True)
class HashedPart(Iterable[Pair]):
    """The pairs of ``corpus`` that ``hashed_split`` sends to the split ``name``, in the corpus's order, at each
    pass."""

    corpus: Iterable[Pair]
    split: SplitConfig
    name: str

    def __iter__(self) -> Iterator[Pair]:
        return (pair for pair in self.corpus if hashed_split(pair[0], self.split) == self.name)


def load_sentence_splits(cfg: DataConfig, data_dir: Path) -> Splits[str]:
    """``{"train", "valid", "test"}`` sentences of a data config, for a language model: the lines of a ``lines``
    corpus, or both sides of a pair corpus (a pair stays in one split, its source then its target)."""
    if cfg.corpus is not None and not isinstance(cfg.corpus, LinesCorpus):
        return load_splits(cfg, data_dir).map(lambda pairs: [s for pair in pairs for s in pair])

    def read(spec: object) -> list[str]:
        return read_sentences(cast(TextCorpus, spec), data_dir, cfg.skip_bad_lines)

    if cfg.corpus is not None:
        return _shuffled(lambda: read(cfg.corpus), cfg.split, lambda sentence: sentence)
    return _explicit(cfg, read)


def read_questions(spec: SquadCorpus, data_dir: Path, skip_bad_lines: bool = False) -> list[Question]:
    """The questions of one SQuAD file; none is an error."""
    path = locate(spec.path, data_dir)
    bad = BadLines(skip_bad_lines)
    questions = read_squad(path, bad)
    bad.warn()
    if not questions:
        raise DataError(f"{path}: no questions" + (f" (all {bad.count} were bad, skipped)" if bad.count else ""))
    return questions


def load_question_splits(cfg: DataConfig, data_dir: Path) -> Splits[Question]:
    """``{"train", "valid", "test"}`` questions of a span-extraction data config: one SQuAD file split by
    ``data.split`` (by question, so a context's questions may fall in different splits; give explicit files to
    keep contexts apart), or SQuAD's own train and dev files."""
    def read(spec: object) -> list[Question]:
        return read_questions(cast(SquadCorpus, spec), data_dir, cfg.skip_bad_lines)

    if cfg.corpus is not None:
        return _shuffled(lambda: read(cfg.corpus), cfg.split, lambda question: question.question)
    return _explicit(cfg, read)

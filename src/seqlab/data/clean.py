"""Cleaning a training corpus (``data.clean``), as Moses's ``clean-corpus-n.perl`` and fairseq's preprocessing do:
exact duplicate pairs dropped (the first kept), and pairs whose sides are too short, too long or too unequal in
words. Valid and test are never cleaned: they are scored as given.

``cleaned`` filters pairs as they are read, so a corpus read from its files at each pass (``CorpusStream``) stays
out of memory: with ``dedup`` one pass first marks each pair's first occurrence by a 64-bit hash of the pair
(8 bytes a pair, in a NumPy array), the next yields the marked pairs. Two different pairs with the same hash would
lose the later one: for 10 million pairs the chance is about 3 in a million.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from seqlab.corpora import CleanConfig
from seqlab.data.corpus import DataError
from seqlab.data.tasks import Pair

log = logging.getLogger("seqlab")


@dataclass
class Cleaned(Iterable[Pair]):
    """``pairs`` (a list, or a corpus that reads its files again at each pass) as ``data.clean`` keeps them, in
    their order; each pass counts what it dropped and the first logs it. The pairs' first occurrences are marked
    once, before the first pass, and kept for the others (1 byte a pair)."""

    pairs: Iterable[Pair]
    config: CleanConfig
    _first: np.ndarray | None = field(default=None, init=False)
    _logged: bool = field(default=False, init=False)

    def __iter__(self) -> Iterator[Pair]:
        if self.config.dedup and self._first is None:
            self._first = _first_occurrences(self.pairs)
        first = self._first
        dropped = {"duplicates": 0, "length": 0, "ratio": 0}
        kept = 0
        for i, pair in enumerate(self.pairs):
            why = "duplicates" if first is not None and not first[i] else _misfit(pair, self.config)
            if why:
                dropped[why] += 1
                continue
            kept += 1
            yield pair
        if not kept:
            raise DataError(f"data.clean: it dropped every training pair ({_counts(dropped)})")
        if not self._logged:
            log.info("data.clean: %d training pairs kept, %s dropped", kept, _counts(dropped))
            self._logged = True


def cleaned(pairs: list[Pair], config: CleanConfig) -> list[Pair]:
    """The pairs ``data.clean`` keeps, as a list (a split in memory)."""
    return list(Cleaned(pairs, config))


def _first_occurrences(pairs: Iterable[Pair]) -> np.ndarray:
    """(pairs,) bool: whether each pair is the first of its exact copies (one pass; 8 bytes a pair)."""
    hashes = np.fromiter((hash(pair) for pair in pairs), dtype=np.int64)
    first = np.zeros(len(hashes), dtype=bool)
    first[np.unique(hashes, return_index=True)[1]] = True
    return first


def _misfit(pair: Pair, config: CleanConfig) -> str | None:
    """Why the pair's lengths in words (split at whitespace) drop it, or None."""
    lengths = sorted(len(side.split()) for side in pair)  # [shorter, longer]
    if lengths[0] < config.min_words or (config.max_words is not None and lengths[1] > config.max_words):
        return "length"
    if config.max_ratio is not None and lengths[1] > config.max_ratio * lengths[0]:
        return "ratio"
    return None


def _counts(dropped: dict[str, int]) -> str:
    return ", ".join(f"{count} by {why}" if why != "duplicates" else f"{count} duplicates"
                     for why, count in dropped.items())

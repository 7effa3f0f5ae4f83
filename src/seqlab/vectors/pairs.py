"""What word2vec trains on: a vocabulary with ``min_count``, subsampling of frequent words, and the
(centre, context) examples of a dynamic window, as the word2vec tools make them (Mikolov et al. 2013); and the
book's CBOW examples, every whole window.

* The vocabulary keeps the words seen at least ``min_count`` times, most frequent first (ties in order of
  first occurrence); the rest are dropped from the sentences, as word2vec does.
* Subsampling keeps each occurrence of a word of frequency ``f`` (its share of all kept words) with
  probability ``(sqrt(f / t) + 1) · t / f`` (word2vec.c's formula, at most 1), so "the" and "." are
  thinned and rare words kept.
* Dynamic window: at each position the window is drawn from 1..``window``, so near words are seen more
  often than far ones (drawn in ``kernel.train_job``, as word2vec.c draws it).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

PAD_CONTEXT = -1  # fills a CBOW context row whose window is narrower than the widest


@dataclass
class Vocabulary:
    words: list[str]  # most frequent first
    counts: np.ndarray  # (V,) occurrences of each word in the corpus
    word_to_id: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.word_to_id = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_count: int = 5) -> Vocabulary:
        counter = Counter(itertools.chain.from_iterable(sentences))  # counted in C, in first-occurrence order
        return cls.counted(list(counter), np.fromiter(counter.values(), np.int64, len(counter)), min_count)[0]

    @classmethod
    def counted(cls, words: list[str], counts: np.ndarray, min_count: int) -> tuple[Vocabulary, np.ndarray]:
        """The vocabulary of ``words`` (in order of first occurrence) seen ``counts`` (V,) times: those seen
        ``min_count`` times or more, most frequent first, ties in order of first occurrence; and the map from each
        given word's place to its id (-1: dropped)."""
        kept = np.flatnonzero(counts >= min_count)
        if not len(kept):
            raise ValueError(f"no word occurs {min_count} times or more: lower min_count")
        kept = kept[np.argsort(-counts[kept], kind="stable")]
        mapping = np.full(len(words), -1, dtype=np.int64)
        mapping[kept] = np.arange(len(kept))
        return cls([words[i] for i in kept], counts[kept].astype(np.int64)), mapping

    def encode(self, sentences: Iterable[Sequence[str]]) -> list[np.ndarray]:
        """Each sentence as ids, the words outside the vocabulary left out."""
        lookup = self.word_to_id
        return [np.array([lookup[w] for w in sentence if w in lookup], dtype=np.int64) for sentence in sentences]


def keep_probabilities(counts: np.ndarray, sample: float = 1e-3) -> np.ndarray:
    """(V,) probability of keeping one occurrence of each word; ``sample`` 0 keeps everything."""
    if sample <= 0:
        return np.ones(len(counts))
    frequency = counts / counts.sum()
    return np.minimum(1.0, (np.sqrt(frequency / sample) + 1) * sample / frequency)


class Stream(NamedTuple):
    """All sentences as one stream of ids (n,), and the sentence each position belongs to (n,)."""

    ids: np.ndarray
    sentence: np.ndarray


def stream(sentences: Sequence[np.ndarray]) -> Stream:
    if not sentences:
        return Stream(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    lengths = np.array([len(ids) for ids in sentences])
    return Stream(np.concatenate(sentences).astype(np.int64), np.repeat(np.arange(len(sentences)), lengths))


def subsample(words: Stream, keep: np.ndarray, rng: np.random.Generator) -> Stream:
    """The stream with each occurrence kept with its word's probability (one draw per position, in order)."""
    kept = rng.random(len(words.ids)) < keep[words.ids]
    return Stream(words.ids[kept], words.sentence[kept])


def neighbours(sentence: np.ndarray, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions whose word ``offset`` away (signed) is in the same sentence, and that word's positions."""
    n = len(sentence)
    position = np.arange(max(0, -offset), min(n, n - offset))
    other = position + offset
    valid = sentence[position] == sentence[other]
    return position[valid], other[valid]


def cbow_examples(words: Stream, window: int) -> tuple[np.ndarray, np.ndarray]:
    """The book's ``create_contexts_target``: (contexts (N, 2·window), centres (N,)) for every position with
    ``window`` words on each side in its sentence (pass the words as one stream for the book's)."""
    ids, sentence = words
    block = np.full((len(ids), 2 * window), PAD_CONTEXT, dtype=np.int64)
    for column, offset in enumerate(o for d in range(1, window + 1) for o in (-d, d)):
        position, other = neighbours(sentence, offset)
        block[position, column] = ids[other]
    whole = (block != PAD_CONTEXT).all(axis=1)
    return block[whole], ids[whole]

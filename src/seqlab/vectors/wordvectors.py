"""Trained word vectors, as ``seqlab.vectors.load(RUN)`` gives them: look up, compare, evaluate, export.

A word is looked up as training saw it (``text.normalize``, lowercased when the run lowercased), so
``vectors["King"]`` finds "king" in a lowercased run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from seqlab.data import DataError
from seqlab.data.corpus import decode_lines
from seqlab.files import atomic_open
from seqlab.rundir import RunDir
from seqlab.text import normalize
from seqlab.vectors.config import VectorsConfig
from seqlab.vectors.evaluate import analogy_accuracy, similarity_spearman
from seqlab.vectors.similarity import analogy, cos_similarity, most_similar


@dataclass
class WordVectors:
    words: list[str]  # most frequent first
    counts: np.ndarray  # (V,)
    vectors: np.ndarray  # (V, dim) float32
    info: dict[str, Any]  # method, dim, vocab_size, corpus_words, seconds
    lowercase: bool = True
    word_to_id: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.word_to_id = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def load(cls, run_dir: str | Path) -> WordVectors:
        run = RunDir(run_dir)
        words, counts, vectors, info = run.vectors()
        return cls(words, counts, vectors, info, run.read_config(VectorsConfig).words.lowercase)

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return self.key(word) in self.word_to_id

    def __getitem__(self, word: str) -> np.ndarray:
        return self.vectors[self._id(word)]

    def key(self, word: str) -> str:
        """``word`` as the vocabulary writes it."""
        return normalize(word, self.lowercase)

    def _id(self, word: str) -> int:
        key = self.key(word)
        if key not in self.word_to_id:
            raise KeyError(f"{word!r} is not in the vocabulary ({len(self.words)} words)")
        return self.word_to_id[key]

    def similarity(self, first: str, second: str) -> float:
        return cos_similarity(self[first], self[second])

    def most_similar(self, word: str, top: int = 10) -> list[tuple[str, float]]:
        self._id(word)
        return most_similar(self.key(word), self.word_to_id, dict(enumerate(self.words)), self.vectors, top)

    def analogy(self, a: str, b: str, c: str, top: int = 5) -> list[tuple[str, float]]:
        """a : b = c : ?  (seed 002 §3.5.3: the nearest words to b − a + c, a, b and c left out)."""
        for word in (a, b, c):
            self._id(word)
        keys = [self.key(w) for w in (a, b, c)]
        return analogy(keys[0], keys[1], keys[2], self.word_to_id, dict(enumerate(self.words)), self.vectors, top)

    def evaluate(self, analogies: str | Path | None = None, similarities: str | Path | None = None) -> dict[str, Any]:
        """``analogy_accuracy`` (%) on a questions-words file and ``spearman`` on a word-similarity file, each
        with its ``coverage`` (%): the share of questions / pairs whose words are all in the vocabulary."""
        result: dict[str, Any] = {"coverage": {}}
        if analogies is not None:
            scores = analogy_accuracy(_read(analogies), self.word_to_id, self.vectors)
            result["analogy_accuracy"] = scores["analogy_accuracy"]
            result["coverage"]["analogies"] = scores["coverage"]
            result["analogies"] = scores
        if similarities is not None:
            try:
                scores = similarity_spearman(_read(similarities), self.word_to_id, self.vectors)
            except ValueError as exc:
                raise DataError(f"{similarities}: not a word-similarity file (word1<TAB>word2<TAB>score): {exc}") from None
            result["spearman"] = scores["spearman"]
            result["coverage"]["similarities"] = scores["coverage"]
            result["similarities"] = scores
        return result

    def export(self, path: str | Path) -> None:
        """The word2vec text format: ``V dim``, then one ``word v1 … v_dim`` line per word, most frequent first
        (what gensim's ``KeyedVectors.load_word2vec_format`` reads)."""
        with atomic_open(path) as f:
            f.write(f"{len(self.words)} {self.vectors.shape[1]}\n".encode())
            for word, row in zip(self.words, self.vectors):
                f.write((word + " " + " ".join(f"{x:.6g}" for x in row) + "\n").encode("utf-8"))


def _read(path: str | Path) -> list[str]:
    try:
        with open(path, "rb") as f:
            return [text for _, text in decode_lines(f, path)]
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror}") from None


def load(run_dir: str | Path) -> WordVectors:
    """The word vectors of a ``seqlab vectors train`` run."""
    return WordVectors.load(run_dir)



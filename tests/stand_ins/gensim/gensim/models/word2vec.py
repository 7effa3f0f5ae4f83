"""``Word2Vec(sentences, ...)`` as gensim takes it: the vocabulary of ``min_count`` (most frequent first, with each
word's count), one ``(V, vector_size)`` float32 matrix, the callbacks around each of ``epochs`` epochs; and its
``wv``'s evaluation on gensim's analogy and word-pair files (their words looked up; every score 0)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from gensim.models.callbacks import CallbackAny2Vec

FAST_VERSION = 0  # gensim's compiled routines: 0 and up; -1 when they are missing


class KeyedVectors:
    def __init__(self, counts: list[tuple[str, int]], vectors: np.ndarray) -> None:
        self.index_to_key = [word for word, _ in counts]
        self.key_to_index = {word: i for i, word in enumerate(self.index_to_key)}
        self.vectors = vectors
        self._counts = dict(counts)

    def get_vecattr(self, key: str, attr: str) -> int:
        if attr != "count":
            raise KeyError(attr)
        return self._counts[key]

    def evaluate_word_analogies(self, analogies: str) -> tuple[float, list[dict[str, object]]]:
        """(accuracy, sections): the questions whose four words are all known count as incorrect."""
        lines = Path(analogies).read_text(encoding="utf-8").splitlines()
        known = [line for line in lines if line.strip() and not line.startswith(":")
                 and all(w.lower() in self.key_to_index for w in line.split())]
        return 0.0, [{"section": "Total accuracy", "correct": [], "incorrect": known}]

    def evaluate_word_pairs(self, pairs: str) -> tuple[tuple[float, float], tuple[float, float], float]:
        """(pearson, spearman, oov %): the share of pairs with an unknown word; both correlations (0, 1)."""
        rows = [line.split("\t") for line in Path(pairs).read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")]
        oov = sum(not (a.lower() in self.key_to_index and b.lower() in self.key_to_index) for a, b, *_ in rows)
        return (0.0, 1.0), (0.0, 1.0), 100.0 * oov / max(len(rows), 1)


class Word2Vec:
    def __init__(self, sentences: list[list[str]], *, sg: int, vector_size: int, window: int, negative: int, hs: int,
                 min_count: int, sample: float, epochs: int, alpha: float, min_alpha: float, cbow_mean: int, seed: int,
                 workers: int, callbacks: list[CallbackAny2Vec]) -> None:
        counted = Counter(word for sentence in sentences for word in sentence)
        kept = sorted(((w, n) for w, n in counted.items() if n >= min_count), key=lambda item: (-item[1], item[0]))
        rng = np.random.default_rng(seed)
        self.corpus_total_words = sum(counted.values())
        self.wv = KeyedVectors(kept, rng.standard_normal((len(kept), vector_size)).astype(np.float32))
        for _ in range(epochs):
            for callback in callbacks:
                callback.on_epoch_begin(self)
            for callback in callbacks:
                callback.on_epoch_end(self)

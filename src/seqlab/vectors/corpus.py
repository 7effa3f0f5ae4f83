"""From text to the ids that count-based vectors and word2vec read (seed 002 §2.3, §3.1–3.3).

``preprocess`` lower-cases, splits off the final period and gives ids in **first-occurrence order**
(``new_id = len(word_to_id)``): "You say goodbye and I say hello." → ``[0, 1, 2, 3, 4, 1, 5, 6]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def preprocess(text: str) -> tuple[np.ndarray, dict[str, int], dict[int, str]]:
    """The seed's ``preprocess``: (corpus ids (n,), word_to_id, id_to_word)."""
    words = text.lower().replace(".", " .").split()
    word_to_id: dict[str, int] = {}
    for word in words:
        word_to_id.setdefault(word, len(word_to_id))
    id_to_word = {i: w for w, i in word_to_id.items()}
    return np.array([word_to_id[w] for w in words], dtype=np.int64), word_to_id, id_to_word


def create_contexts_target(corpus: np.ndarray, window_size: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Every position with ``window_size`` words on each side: contexts (n - 2ws, 2ws), targets (n - 2ws,)."""
    if window_size < 1:
        raise ValueError(f"window_size must be at least 1, got {window_size}")
    n = len(corpus)
    target = corpus[window_size : n - window_size]
    offsets = [t for t in range(-window_size, window_size + 1) if t != 0]
    contexts = np.stack([corpus[window_size + t : n - window_size + t] for t in offsets], axis=1)
    return contexts, target


def convert_one_hot(ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """ids of any shape -> one-hot int32 with a last axis of ``vocab_size``: (N,) -> (N, V), (N, C) -> (N, C, V)."""
    return np.eye(vocab_size, dtype=np.int32)[ids]


def bag_of_words(words: Sequence[str], word_to_id: dict[str, int]) -> np.ndarray:
    """Counts of each vocabulary word in ``words`` (seed 002 §3.4: "I am a girl" -> [1, 1, 1, 0, 1])."""
    counts = np.zeros(len(word_to_id), dtype=np.int32)
    for word in words:
        counts[word_to_id[word]] += 1
    return counts

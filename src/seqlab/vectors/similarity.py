"""Similarity in vector space (seed 002 §2.3 ``cos_similarity``, ``most_similar``; §4.3 ``analogy``)."""

from __future__ import annotations

import numpy as np


def cos_similarity(x: np.ndarray, y: np.ndarray, eps: float = 1e-8) -> float:
    """``x·y / (‖x‖ ‖y‖)``, each vector normalised first (``eps`` keeps a zero vector from dividing by 0)."""
    nx = x / (np.sqrt(np.sum(x**2)) + eps)
    ny = y / (np.sqrt(np.sum(y**2)) + eps)
    return float(np.dot(nx, ny))


def unit_rows(word_matrix: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    """Every row scaled to length 1 (float64), so that dot products are cosines."""
    matrix = np.asarray(word_matrix, dtype=np.float64)
    return matrix / (np.linalg.norm(matrix, axis=1, keepdims=True) + eps)


def _id(word: str, word_to_id: dict[str, int]) -> int:
    if word not in word_to_id:
        raise KeyError(f"{word!r} is not in the vocabulary")
    return word_to_id[word]


def most_similar(query: str, word_to_id: dict[str, int], id_to_word: dict[int, str], word_matrix: np.ndarray,
                 top: int = 5) -> list[tuple[str, float]]:
    """The ``top`` words closest to ``query`` by cosine similarity, best first, the query itself left out;
    ties keep the vocabulary order."""
    query_id = _id(query, word_to_id)
    matrix = unit_rows(word_matrix)
    similarity = matrix @ matrix[query_id]  # (V,)
    order = [i for i in np.argsort(-similarity, kind="stable") if i != query_id][:top]
    return [(id_to_word[int(i)], float(similarity[i])) for i in order]


def analogy(a: str, b: str, c: str, word_to_id: dict[str, int], id_to_word: dict[int, str],
            word_matrix: np.ndarray, top: int = 5) -> list[tuple[str, float]]:
    """a : b = c : ?, the words whose vectors are closest in cosine to ``b - a + c`` (a, b, c left out)."""
    ids = [_id(w, word_to_id) for w in (a, b, c)]
    matrix = unit_rows(word_matrix)
    query = matrix[ids[1]] - matrix[ids[0]] + matrix[ids[2]]
    query /= np.linalg.norm(query) + 1e-8
    similarity = matrix @ query
    order = [i for i in np.argsort(-similarity, kind="stable") if i not in ids][:top]
    return [(id_to_word[int(i)], float(similarity[i])) for i in order]

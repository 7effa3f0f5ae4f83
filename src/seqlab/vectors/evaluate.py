"""Scores of word vectors, as gensim computes them, so that the two compare on the same files.

* Analogies (the ``questions-words.txt`` format: ``: section`` lines, then ``a b c d``): a question is
  right when ``analogy(a, b, c)`` (the nearest word to ``b − a + c`` by cosine, a, b and c left out) is d.
  Questions with a word outside the vocabulary are skipped; accuracy is over the others, and the
  coverage says how many those are.
* Similarity (``word1 <tab> word2 <tab> score`` lines, ``#`` comments, e.g. WordSim-353, SimLex-999):
  Spearman's rank correlation between the cosine of the two vectors and the human score, over the pairs
  whose words are both in the vocabulary.

Words are lower-cased first (gensim's ``case_insensitive=True``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from seqlab.vectors.similarity import unit_rows


def analogy_accuracy(lines: Iterable[str], word_to_id: dict[str, int], word_matrix: np.ndarray,
                     chunk: int = 1024) -> dict[str, Any]:
    """{'analogy_accuracy' (%), 'correct', 'covered', 'questions', 'coverage' (%)}."""
    questions = [line.lower().split() for line in lines if line.strip() and not line.startswith(":")]
    covered = [q for q in questions if len(q) == 4 and all(w in word_to_id for w in q)]
    ids = np.array([[word_to_id[w] for w in q] for q in covered], dtype=np.int64).reshape(-1, 4)
    unit = unit_rows(word_matrix)
    correct = 0
    for start in range(0, len(ids), chunk):
        a, b, c, d = ids[start : start + chunk].T
        query = unit[b] - unit[a] + unit[c]  # (Q, H)
        scores = unit_rows(query) @ unit.T  # (Q, V)
        rows = np.arange(len(a))
        for excluded in (a, b, c):
            scores[rows, excluded] = -np.inf
        correct += int((scores.argmax(axis=1) == d).sum())
    return {"analogy_accuracy": 100.0 * correct / max(len(covered), 1), "correct": correct,
            "covered": len(covered), "questions": len(questions),
            "coverage": 100.0 * len(covered) / max(len(questions), 1)}


def similarity_spearman(lines: Iterable[str], word_to_id: dict[str, int], word_matrix: np.ndarray) -> dict[str, Any]:
    """{'spearman', 'covered', 'pairs', 'coverage' (%)}; 'spearman' is None with fewer than two covered pairs."""
    pairs = []
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        first, second, score = line.rstrip("\n").split("\t")[:3]
        pairs.append((first.lower(), second.lower(), float(score)))
    covered = [(a, b, s) for a, b, s in pairs if a in word_to_id and b in word_to_id]
    unit = unit_rows(word_matrix)
    cosines = [float(unit[word_to_id[a]] @ unit[word_to_id[b]]) for a, b, _ in covered]
    rho = float(spearmanr(cosines, [s for _, _, s in covered]).statistic) if len(covered) > 1 else None
    return {"spearman": rho, "covered": len(covered), "pairs": len(pairs),
            "coverage": 100.0 * len(covered) / max(len(pairs), 1)}

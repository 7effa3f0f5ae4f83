"""Analogy accuracy and similarity correlation with their coverage, on hand-made vectors."""

import numpy as np
import pytest

from seqlab.vectors.evaluate import analogy_accuracy, similarity_spearman
from seqlab.vectors.similarity import analogy

WORDS = ["man", "woman", "king", "queen", "boy", "girl", "apple"]
VECTORS = np.array([[1.0, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 0], [1, 0, 0, 1], [1, 1, 0, 1],
                    [0, 0, 0, -1]])
WORD_TO_ID = {w: i for i, w in enumerate(WORDS)}


def test_analogy_accuracy_counts_right_answers_and_skips_unknown_words():
    lines = [": family", "man woman king queen", "Man Woman Boy Girl", "man woman king apple",
             "man woman cat dog", ""]
    result = analogy_accuracy(lines, WORD_TO_ID, VECTORS)
    assert result["questions"] == 4 and result["covered"] == 3 and result["correct"] == 2
    assert result["analogy_accuracy"] == pytest.approx(200 / 3)
    assert result["coverage"] == pytest.approx(75.0)


def test_analogy_accuracy_agrees_with_analogy_on_random_vectors():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(7, 5))
    lines = [" ".join(rng.choice(WORDS, size=4, replace=False)) for _ in range(40)]
    id_to_word = dict(enumerate(WORDS))
    questions = [q.split() for q in lines]
    expected = sum(analogy(a, b, c, WORD_TO_ID, id_to_word, vectors, top=1)[0][0] == d for a, b, c, d in questions)
    assert analogy_accuracy(lines, WORD_TO_ID, vectors, chunk=7)["correct"] == expected


def test_similarity_spearman_with_coverage():
    lines = ["# word1\tword2\tscore", "king\tqueen\t9.0", "man\twoman\t8.0", "king\tapple\t1.0",
             "queen\tapple\t0.5", "cat\tdog\t7.0"]
    result = similarity_spearman(lines, WORD_TO_ID, VECTORS)
    unit = VECTORS / np.linalg.norm(VECTORS, axis=1, keepdims=True)
    cosines = [unit[2] @ unit[3], unit[0] @ unit[1], unit[2] @ unit[6], unit[3] @ unit[6]]
    from scipy.stats import spearmanr
    assert result["spearman"] == pytest.approx(spearmanr(cosines, [9.0, 8.0, 1.0, 0.5]).statistic)
    assert (result["covered"], result["pairs"], result["coverage"]) == (4, 5, 80.0)
    assert similarity_spearman(["cat\tdog\t1"], WORD_TO_ID, VECTORS)["spearman"] is None

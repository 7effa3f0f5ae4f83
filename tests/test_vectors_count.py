"""Count-based word vectors against seed 002's worked examples (S14–S22, S26, S32) and, for the sparse
versions real corpora use, against the dense ones."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from seqlab.vectors.corpus import bag_of_words, convert_one_hot, create_contexts_target, preprocess
from seqlab.vectors.count import co_matrix_sparse, create_co_matrix, pmi, ppmi, ppmi_sparse, svd_vectors
from seqlab.vectors.similarity import analogy, cos_similarity, most_similar

TEXT = "You say goodbye and I say hello."
TOY_CO_MATRIX = [[0, 1, 0, 0, 0, 0, 0], [1, 0, 1, 0, 1, 1, 0], [0, 1, 0, 1, 0, 0, 0], [0, 0, 1, 0, 1, 0, 0],
                 [0, 1, 0, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 1, 0]]


def test_preprocess_gives_ids_in_first_occurrence_order():  # S14
    corpus, word_to_id, id_to_word = preprocess(TEXT)
    assert corpus.tolist() == [0, 1, 2, 3, 4, 1, 5, 6]
    assert id_to_word == {0: "you", 1: "say", 2: "goodbye", 3: "and", 4: "i", 5: "hello", 6: "."}
    assert word_to_id == {w: i for i, w in id_to_word.items()}


def test_co_occurrence_matrix_of_the_toy_corpus():  # S15
    corpus, word_to_id, _ = preprocess(TEXT)
    matrix = create_co_matrix(corpus, len(word_to_id), window_size=1)
    assert matrix.dtype == np.int32
    assert matrix.tolist() == TOY_CO_MATRIX
    assert matrix[word_to_id["say"]].tolist() == [1, 0, 1, 0, 1, 1, 0]


def _seed_co_matrix(corpus, vocab_size, window_size):
    """The seed's create_co_matrix, loop for loop."""
    matrix = np.zeros((vocab_size, vocab_size), dtype=np.int32)
    for idx, word_id in enumerate(corpus):
        for i in range(1, window_size + 1):
            if idx - i >= 0:
                matrix[word_id, corpus[idx - i]] += 1
            if idx + i < len(corpus):
                matrix[word_id, corpus[idx + i]] += 1
    return matrix


@pytest.mark.parametrize("window_size", [1, 2, 3])
def test_dense_and_sparse_counts_equal_the_seeds_loops(window_size):
    rng = np.random.default_rng(window_size)
    corpus = rng.integers(0, 20, size=300)
    expected = _seed_co_matrix(corpus, 20, window_size)
    assert np.array_equal(create_co_matrix(corpus, 20, window_size), expected)
    assert np.array_equal(co_matrix_sparse([corpus], 20, window_size).toarray(), expected)


def test_sparse_counts_do_not_cross_sentences():
    counts = co_matrix_sparse([np.array([0, 1]), np.array([2, 3])], 4, window_size=2).toarray()
    assert counts[1, 2] == 0 and counts[0, 2] == 0
    assert counts[0, 1] == counts[1, 0] == counts[2, 3] == 1


def test_cosine_similarity_of_you_and_i():  # S16
    corpus, word_to_id, _ = preprocess(TEXT)
    matrix = create_co_matrix(corpus, len(word_to_id))
    assert cos_similarity(matrix[word_to_id["you"]], matrix[word_to_id["i"]]) == pytest.approx(1 / math.sqrt(2), abs=1e-4)


def test_most_similar_ranks_by_cosine_and_leaves_the_query_out():  # S17
    corpus, word_to_id, id_to_word = preprocess(TEXT)
    matrix = create_co_matrix(corpus, len(word_to_id))
    ranked = most_similar("you", word_to_id, id_to_word, matrix, top=6)
    assert [w for w, _ in ranked[:3]] == ["goodbye", "i", "hello"]
    assert [s for _, s in ranked[:3]] == pytest.approx([0.7071] * 3, abs=1e-4)
    assert [s for _, s in ranked[3:]] == pytest.approx([0.0] * 3, abs=1e-6)
    assert "you" not in [w for w, _ in ranked]
    with pytest.raises(KeyError, match="'cat' is not in the vocabulary"):
        most_similar("cat", word_to_id, id_to_word, matrix)


def test_pmi_of_the_seeds_examples():  # S18
    assert pmi(10, 10000, 1000, 20) == pytest.approx(2.3219, abs=1e-4)
    assert pmi(5, 10000, 20, 10) == pytest.approx(7.9658, abs=1e-4)


def _seed_ppmi(matrix, eps=1e-8):
    """The seed's ppmi, loop for loop."""
    out = np.zeros_like(matrix, dtype=np.float32)
    total, sums = np.sum(matrix), np.sum(matrix, axis=0)
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            out[i, j] = max(0, np.log2(matrix[i, j] * total / (sums[j] * sums[i]) + eps))
    return out


def test_ppmi_equals_the_seeds_loops_and_is_finite():  # S18
    corpus, word_to_id, _ = preprocess(TEXT)
    matrix = create_co_matrix(corpus, len(word_to_id))
    dense = ppmi(matrix)
    assert np.array_equal(dense, _seed_ppmi(matrix))
    assert np.isfinite(dense).all() and (dense >= 0).all()
    assert dense[0, 1] == pytest.approx(math.log2(1 * 14 / (1 * 4)), abs=1e-6)


def test_sparse_ppmi_equals_the_dense_one():
    rng = np.random.default_rng(0)
    sentences = [rng.integers(0, 30, size=rng.integers(2, 15)) for _ in range(200)]
    counts = co_matrix_sparse(sentences, 30, window_size=2)
    assert np.allclose(ppmi_sparse(counts).toarray(), ppmi(counts.toarray()), atol=1e-5)


def test_a_word_that_never_co_occurs_gets_zeros_not_nan():
    counts = np.array([[0, 2, 0], [2, 0, 0], [0, 0, 0]])
    assert np.array_equal(ppmi(counts)[2], [0.0, 0.0, 0.0])


def test_svd_vectors_are_the_leading_columns_of_u():  # S19
    corpus, word_to_id, _ = preprocess(TEXT)
    matrix = ppmi(create_co_matrix(corpus, len(word_to_id)))
    u, s, vt = np.linalg.svd(matrix.astype(np.float64))
    assert np.allclose(u @ np.diag(s) @ vt, matrix, atol=1e-6)
    vectors = svd_vectors(matrix, 2)
    assert vectors.shape == (7, 2) and np.allclose(vectors, u[:, :2], atol=1e-6)


def test_randomized_svd_of_a_sparse_matrix_finds_the_same_subspace():
    rng = np.random.default_rng(1)
    low_rank = rng.normal(size=(60, 3)) @ rng.normal(size=(3, 60))
    exact = np.linalg.svd(low_rank)[0][:, :3]
    found = svd_vectors(sp.csr_matrix(low_rank), 3, randomized=True)
    assert np.allclose(np.abs(exact.T @ found), np.eye(3), atol=1e-4)  # the same directions, up to sign
    with pytest.raises(ValueError, match="randomized=True"):
        svd_vectors(sp.csr_matrix(low_rank), 3)


def test_one_hot_row_times_a_weight_matrix_is_a_row_lookup():  # S20
    weights = np.random.default_rng(2).normal(size=(7, 3))
    assert np.array_equal(convert_one_hot(np.array([0]), 7) @ weights, weights[[0]])
    assert convert_one_hot(np.array(2), 7).tolist() == [0, 0, 1, 0, 0, 0, 0]


def test_contexts_and_targets_for_windows_1_and_2():  # S21
    corpus, _, _ = preprocess(TEXT)
    contexts, target = create_contexts_target(corpus, window_size=1)
    assert contexts.tolist() == [[0, 2], [1, 3], [2, 4], [3, 1], [4, 5], [1, 6]]
    assert target.tolist() == [1, 2, 3, 4, 1, 5]
    contexts, target = create_contexts_target(corpus, window_size=2)
    assert contexts.tolist() == [[0, 1, 3, 4], [1, 2, 4, 1], [2, 3, 1, 5], [3, 4, 5, 6]]
    assert target.tolist() == [2, 3, 4, 1]


def test_convert_one_hot_shapes_and_rows():  # S22
    corpus, _, _ = preprocess(TEXT)
    contexts, target = create_contexts_target(corpus, window_size=1)
    target_hot, contexts_hot = convert_one_hot(target, 7), convert_one_hot(contexts, 7)
    assert target_hot.shape == (6, 7) and target_hot.dtype == np.int32
    assert target_hot[0].tolist() == [0, 1, 0, 0, 0, 0, 0]
    assert contexts_hot.shape == (6, 2, 7)
    assert contexts_hot[0].tolist() == [[1, 0, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0, 0]]
    assert contexts_hot[5].tolist() == [[0, 1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 1]]


def test_bag_of_words_of_i_am_a_girl():  # S26
    vocabulary = {"I": 0, "am": 1, "a": 2, "boy": 3, "girl": 4}
    assert bag_of_words(["I", "am", "a", "girl"], vocabulary).tolist() == [1, 1, 1, 0, 1]


def test_analogy_on_hand_made_vectors():  # S32
    words = ["man", "woman", "king", "queen", "apple"]
    vectors = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [0.0, 0.0, -1.0]])
    word_to_id = {w: i for i, w in enumerate(words)}
    id_to_word = dict(enumerate(words))
    ranked = analogy("man", "woman", "king", word_to_id, id_to_word, vectors, top=2)
    assert ranked[0][0] == "queen"
    assert {"man", "woman", "king"}.isdisjoint(w for w, _ in ranked)

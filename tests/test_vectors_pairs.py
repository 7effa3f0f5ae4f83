"""word2vec's examples: vocabulary with min_count, subsampling, the book's CBOW windows, CBOW padding."""

import numpy as np
import pytest
import torch

from seqlab.vectors.corpus import create_contexts_target
from seqlab.vectors.pairs import (
    PAD_CONTEXT,
    Stream,
    Vocabulary,
    cbow_examples,
    keep_probabilities,
    stream,
    subsample,
)
from seqlab.vectors.word2vec import NegativeSamplingWord2Vec


def test_vocabulary_keeps_frequent_words_most_frequent_first():
    sentences = [["b", "a", "c", "a"], ["c", "d", "a", "b"]]
    vocabulary = Vocabulary.build(sentences, min_count=2)
    assert vocabulary.words == ["a", "b", "c"]  # a: 3; b and c: 2, in order of first occurrence
    assert vocabulary.counts.tolist() == [3, 2, 2]
    assert [ids.tolist() for ids in vocabulary.encode(sentences)] == [[1, 0, 2, 0], [2, 0, 1]]  # "d" dropped
    with pytest.raises(ValueError, match="lower min_count"):
        Vocabulary.build(sentences, min_count=4)


def test_keep_probability_is_word2vecs_formula():
    counts = np.array([900, 90, 10])
    keep = keep_probabilities(counts, sample=0.01)
    f = counts / 1000
    assert np.allclose(keep, np.minimum(1, (np.sqrt(f / 0.01) + 1) * 0.01 / f))
    assert keep[0] < keep[1] <= keep[2] == 1.0
    assert keep_probabilities(counts, sample=0).tolist() == [1.0, 1.0, 1.0]


def test_subsampling_keeps_each_word_at_its_rate():
    keep = np.array([0.2, 1.0])
    sentence = np.array([0, 1] * 50_000)
    kept = subsample(stream([sentence]), keep, np.random.default_rng(0)).ids
    counts = np.bincount(kept, minlength=2)
    assert counts[1] == 50_000 and counts[0] / 50_000 == pytest.approx(0.2, abs=0.01)


def test_the_books_windows_stay_in_their_sentence():
    contexts, centres = cbow_examples(stream([np.array([5, 6, 7]), np.array([8, 9, 10, 11])]), 1)
    assert centres.tolist() == [6, 9, 10]
    assert contexts.tolist() == [[5, 7], [8, 10], [9, 11]]


def test_the_books_whole_windows_over_one_stream_are_create_contexts_target():
    """Every window whole, the words as one stream (the book's CBOW), the book's examples: the same centres, and
    the same context words (seqlab orders the columns by distance, -1, +1, -2, +2)."""
    ids = np.random.default_rng(1).integers(0, 20, size=40)
    contexts, centres = cbow_examples(Stream(ids, np.zeros_like(ids)), 3)
    book_contexts, book_centres = create_contexts_target(ids, 3)
    assert centres.tolist() == book_centres.tolist()
    assert contexts[:, [4, 2, 0, 1, 3, 5]].tolist() == book_contexts.tolist()  # back to -3, -2, -1, +1, +2, +3


def test_cbow_mean_leaves_the_padding_out():
    model = NegativeSamplingWord2Vec(10, 4, cbow=True, generator=torch.Generator().manual_seed(0))
    h = model._context_mean(torch.tensor([[3, PAD_CONTEXT], [3, 4]]))
    assert torch.allclose(h[0], model.w_in.weight[3])
    assert torch.allclose(h[1], model.w_in.weight[[3, 4]].mean(dim=0))

"""word2vec end to end on a corpus with planted structure: the vectors must find it."""

import numpy as np
import pytest
import torch

from seqlab.vectors.config import VectorsTrainConfig
from seqlab.vectors.pairs import Vocabulary
from seqlab.vectors.similarity import most_similar
from seqlab.vectors.train import train_word2vec

GROUPS = [[f"{g}{i}" for i in range(5)] for g in "abcd"]  # four topics of five words each


def _corpus(seed=0, sentences=1500):
    """Every sentence draws its words from one group only: words of a group share their contexts."""
    rng = np.random.default_rng(seed)
    return [list(rng.choice(GROUPS[rng.integers(4)], size=8)) for _ in range(sentences)]


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("method", ["skipgram", "cbow"])
def test_vectors_recover_the_planted_groups(method, workers):
    """One thread, or two updating the same tables at once (their runs differ from run to run)."""
    text = _corpus()
    vocabulary = Vocabulary.build(text, min_count=1)
    cfg = VectorsTrainConfig(method=method, dim=16, window=2, negative=5, min_count=1, sample=0, epochs=3,
                             alpha=0.025, workers=workers, seed=3)
    model = train_word2vec(vocabulary.encode(text), vocabulary.counts, cfg, progress=False)
    id_to_word = dict(enumerate(vocabulary.words))
    vectors = model.word_vecs.numpy()
    hits = 0
    for group in GROUPS:
        for word in group:
            neighbours = [w for w, _ in most_similar(word, vocabulary.word_to_id, id_to_word, vectors, top=4)]
            hits += sum(n[0] == word[0] for n in neighbours)
    assert hits / (20 * 4) >= 0.9


def test_training_is_reproducible():
    text = _corpus(sentences=200)
    vocabulary = Vocabulary.build(text, min_count=1)
    cfg = VectorsTrainConfig(dim=8, window=2, min_count=1, epochs=1, seed=5)
    first = train_word2vec(vocabulary.encode(text), vocabulary.counts, cfg, progress=False).word_vecs
    again = train_word2vec(vocabulary.encode(text), vocabulary.counts, cfg, progress=False).word_vecs
    other = train_word2vec(vocabulary.encode(text), vocabulary.counts, cfg.model_copy(update={"seed": 6}),
                           progress=False).word_vecs
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_the_books_recipe_trains_on_one_worker():
    with pytest.raises(ValueError, match="train.workers is word2vec's"):
        VectorsTrainConfig(method="cbow", recipe="book", workers=2)

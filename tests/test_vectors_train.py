"""word2vec end to end on a corpus with planted structure: the vectors must find it."""

import threading

import numpy as np
import pytest
import torch

from seqlab.vectors import kernel, train
from seqlab.vectors.config import VectorsTrainConfig
from seqlab.vectors.pairs import Vocabulary
from seqlab.vectors.similarity import most_similar
from seqlab.vectors.train import _Copies, _Own, _OwnRows, train_word2vec

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


def test_every_workers_change_to_its_copies_reaches_the_tables(monkeypatch):
    """Several workers each update copies of the tables' first rows (skip-gram: as many of W_out's as ``OWN_BYTES``
    holds and none of W_in's; CBOW: the hottest few of each): what each changed is added to its table when it
    merges and at the epoch's end, and a merged copy reads the table afresh. A worker alone has no copy."""
    monkeypatch.setattr(train, "OWN_BYTES", 24)  # two rows of three float32
    w_in, w_out = -np.arange(12, dtype=np.float32).reshape(4, 3), np.arange(12, dtype=np.float32).reshape(4, 3)
    expected = w_out.copy()
    copies = _OwnRows(w_in, w_out, "skipgram", workers=2)
    mine: dict[int, _Own] = {}
    for worker in range(2):  # each thread its own copy
        thread = threading.Thread(target=lambda worker=worker: mine.__setitem__(worker, copies.mine()))
        thread.start()
        thread.join()
    first, second = mine[0].copy_out, mine[1].copy_out
    assert first is not second and first.shape == (2, 2, 3) and list(mine[0].clock) == [0, 0, 0, 3 * 2, 0]
    assert mine[0].copy_in.shape == (2, 0, 3)
    first[0, 0] += 1
    kernel.merge(w_out, first, 2)  # mid-epoch: W_out has the first worker's change, which its copy now holds
    second[0, 0] += 2
    second[0, 1] -= 1
    first[0, 1] += 4
    mine[1].clock[0] = 5
    copies.merge_all()
    expected[0] += 3
    expected[1] += 3
    assert np.array_equal(w_out, expected)
    assert np.array_equal(second[0], w_out[:2]) and np.array_equal(second[1], w_out[:2]) and mine[1].clock[0] == 0
    monkeypatch.setattr(_OwnRows, "COPY", {"cbow": _Copies(out_rows=1, in_rows=2, words_a_row=4, hot_rows=1,
                                                           hot_words_a_row=3)})
    cbow = _OwnRows(w_in, w_out, "cbow", workers=2)
    assert cbow.rows == (2, 1) and list(cbow.mine().clock) == [0, 3, 0, 8, 1]
    own, before = cbow.mine(), w_in.copy()
    own.copy_in[0, 1] += 5
    cbow.merge_all()
    assert np.array_equal(w_in - before, np.array([[0, 0, 0], [5, 5, 5], [0, 0, 0], [0, 0, 0]]))
    assert _OwnRows(w_in, w_out, "cbow", workers=1).rows == (0, 0)

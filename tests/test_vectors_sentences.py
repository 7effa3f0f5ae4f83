"""word2vec's corpus on disk (``data.on_disk``): the same vocabulary and ids as in memory, windows of whole
sentences, the same vectors where it is one window, every window trained once an epoch, and a killed run resumed
from the ids it wrote."""

from __future__ import annotations

import numpy as np
import pytest

from seqlab.config import ConfigError, parse_config
from seqlab.tokenizer import split_words
from seqlab.vectors import sentences as on_disk
from seqlab.vectors.config import VectorsConfig, VectorsTrainConfig
from seqlab.vectors.pairs import Vocabulary
from seqlab.vectors.run import CORPUS, train_vectors
from seqlab.vectors.sentences import InMemory, OnDisk
from seqlab.vectors.train import Word2VecState, _Kernel, train_word2vec

TEXTS = ["The cat sat .", "", "a dog ran , the cat ran", "Rare words go", "the dog sat", "cat cat dog", "x"] * 3


@pytest.fixture
def small_windows(monkeypatch):
    """Windows of about 7 words, written 4 lines at a time."""
    monkeypatch.setattr(on_disk, "WINDOW_WORDS", 7)
    monkeypatch.setattr(on_disk, "BLOCK_LINES", 4)


def _windows(corpus: OnDisk) -> list[tuple[np.ndarray, np.ndarray]]:
    return [corpus.window(w) for w in range(len(corpus.window_words))]


@pytest.mark.parametrize("min_count", [1, 3])
def test_the_ids_on_disk_are_the_vocabularys_encoding_in_windows_of_whole_sentences(tmp_path, small_windows, min_count):
    corpus, vocabulary = OnDisk.write(iter(TEXTS), tmp_path / "corpus", min_count, True, False, progress=False)
    words = split_words(TEXTS, lowercase=True)
    expected = Vocabulary.build(words, min_count)
    assert vocabulary.words == expected.words and np.array_equal(vocabulary.counts, expected.counts)
    memory = InMemory.of(expected.encode(words))
    windows = _windows(corpus)
    assert len(windows) > 2 and corpus.words == memory.words == sum(corpus.window_words)
    assert np.array_equal(np.concatenate([ids for ids, _ in windows]), memory.ids)
    assert np.array_equal(np.concatenate([lengths for _, lengths in windows]), memory.lengths)  # empty ones kept
    ends = np.cumsum(corpus.window_words)
    for (ids, lengths), size, end in zip(windows[:-1], corpus.window_words, ends):
        assert size == len(ids) == lengths.sum() and (end - lengths[-1]) // 7 < end // 7  # cut as it passes 7k words
        assert ids.dtype == lengths.dtype == np.int64
    assert sorted(p.name for p in (tmp_path / "corpus").iterdir()) == ["ids.bin", "lengths.bin", "manifest.json"]
    assert OnDisk.written(tmp_path / "corpus") is not None and OnDisk.written(tmp_path / "nothing") is None


def test_no_word_often_enough_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no word occurs 100 times or more"):
        OnDisk.write(iter(TEXTS), tmp_path / "corpus", 100, True, False, progress=False)


class _Counted:
    """A corpus of windows that counts how often each is read."""

    def __init__(self, corpus: OnDisk) -> None:
        self.corpus, self.reads = corpus, list[int]()
        self.words, self.window_words = corpus.words, corpus.window_words

    def window(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        self.reads.append(int(index))
        return self.corpus.window(index)


def test_an_epoch_reads_every_window_once_in_an_order_of_its_own(tmp_path, small_windows):
    corpus, vocabulary = OnDisk.write(iter(TEXTS * 20), tmp_path / "corpus", 1, True, False, progress=False)
    counted = _Counted(corpus)
    cfg = VectorsTrainConfig(method="cbow", dim=4, window=2, min_count=1, epochs=2, sample=0)
    train_word2vec(counted, vocabulary.counts, cfg, progress=False)
    windows = len(corpus.window_words)
    first, second = counted.reads[:windows], counted.reads[windows:]
    assert sorted(first) == sorted(second) == list(range(windows)) and first != second
    bar = _Bar()
    _Kernel(corpus, vocabulary.counts, cfg)(Word2VecState.start(len(vocabulary.counts), cfg), 0, bar)  # type: ignore[arg-type]
    assert bar.n == corpus.words  # every word trained on once


class _Bar:
    n = 0

    def update(self, words: int) -> None:
        self.n += words

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        pass


def test_several_windows_train_the_same_vectors_for_a_seed(tmp_path, small_windows):
    corpus, vocabulary = OnDisk.write(iter(TEXTS * 20), tmp_path / "corpus", 1, True, False, progress=False)
    cfg = VectorsTrainConfig(method="skipgram", dim=4, window=2, min_count=1, epochs=2)
    one, two = (train_word2vec(corpus, vocabulary.counts, cfg, progress=False).word_vecs for _ in range(2))
    assert np.array_equal(one, two)
    assert not np.array_equal(one, train_word2vec(corpus, vocabulary.counts, cfg.model_copy(update={"seed": 2}),
                                                  progress=False).word_vecs)


@pytest.fixture
def corpus_dir(tmp_path):
    rng = np.random.default_rng(0)
    groups = [[f"{g}{i}" for i in range(5)] for g in "abcd"]
    lines = [" ".join(rng.choice(groups[rng.integers(4)], size=8)) for _ in range(600)]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def _config(**data) -> VectorsConfig:
    raw = {"data": {"corpora": [{"format": "lines", "path": "corpus.txt"}]} | data,
           "train": {"method": "cbow", "dim": 8, "window": 2, "min_count": 1, "epochs": 3, "seed": 3}}
    return parse_config(raw, schema=VectorsConfig)


def test_a_corpus_of_one_window_on_disk_trains_the_vectors_of_the_one_in_memory(tmp_path, corpus_dir):
    memory = train_vectors(_config(), tmp_path / "memory", corpus_dir, progress=False)
    disk = train_vectors(_config(on_disk=True), tmp_path / "disk", corpus_dir, progress=False)
    assert disk.words == memory.words and np.array_equal(disk.vectors, memory.vectors)
    assert disk.info["corpus_words"] == memory.info["corpus_words"] == 600 * 8
    assert not (tmp_path / "disk" / CORPUS).exists()  # the ids go once the vectors are made


@pytest.mark.parametrize("train", [{"method": "count"}, {"method": "cbow", "recipe": "book"}])
def test_on_disk_is_word2vecs(train):
    raw = {"data": {"corpora": [{"format": "lines", "path": "c.txt"}], "on_disk": True}, "train": train}
    with pytest.raises(ConfigError, match="data.on_disk is word2vec's"):
        parse_config(raw, schema=VectorsConfig)

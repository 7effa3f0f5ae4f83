"""The Kneser-Ney model beside a language model (seqlab.model.kneser_ney): held against a plain transcription of
Chen & Goodman's interpolated modified Kneser-Ney and against KenLM's own estimates (an ARPA file lmplz wrote), a
distribution at every context, sentences that never reach into the one before, its saved state, and the network's
probabilities interpolated with it everywhere a language model answers."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from seqlab.model.kneser_ney import KneserNey, KneserNeyConfig, _context, _extend
from seqlab.specials import EOS

V = 404  # ids 4 … 403 are words (0 … 3: PAD, SOS, EOS, UNK)
DATA = Path(__file__).parent / "data"


def _sentences(count: int, seed: int) -> list[list[int]]:
    """Sentences of Zipf-distributed words with some structure: a word often follows its predecessor + 1."""
    rng = np.random.default_rng(seed)
    sentences = []
    for _ in range(count):
        words = [int(4 + min(rng.zipf(1.6), V - 5))]
        for _ in range(int(rng.integers(1, 9))):
            follow = rng.random() < 0.5
            words.append(4 + (words[-1] - 3) % (V - 4) if follow else int(4 + min(rng.zipf(1.6), V - 5)))
        sentences.append(words)
    return sentences


def _stream(sentences: list[list[int]]) -> np.ndarray:
    """The language model's stream: <eos>, then each sentence followed by <eos>."""
    return np.array([EOS, *(t for s in sentences for t in (*s, EOS))], dtype=np.int64)


class Reference:
    """Chen & Goodman's interpolated modified Kneser-Ney written out with dictionaries, one n-gram at a time: the
    formulas of the module's docstring, independently of its arrays."""

    def __init__(self, sentences: list[list[int]], order: int, vocab: int) -> None:
        self.order, self.vocab = order, vocab
        raw: Counter[tuple] = Counter()
        for s in sentences:
            padded = ["<s>", *s, EOS]
            for i in range(1, len(padded)):
                for k in range(1, order + 1):
                    if i - k + 1 >= 0:
                        raw[tuple(padded[i - k + 1 : i + 1])] += 1
        left: dict[tuple, set] = defaultdict(set)
        for gram in raw:
            if len(gram) > 1:
                left[gram[1:]].add(gram[0])
        self.a = {g: (c if len(g) == order or g[0] == "<s>" else len(left[g])) for g, c in raw.items()}
        self.d = {}
        for k in range(1, order + 1):
            t = Counter(c for g, c in self.a.items() if len(g) == k)
            y = t[1] / (t[1] + 2 * t[2])
            self.d[k] = [0.0, *(j - (j + 1) * y * t[j + 1] / t[j] for j in (1, 2, 3))]
        self.followers: dict[tuple, list[tuple]] = defaultdict(list)
        for g in self.a:
            self.followers[g[:-1]].append(g)

    def discount(self, k: int, a: float) -> float:
        return self.d[k][min(int(a), 3)]

    def p(self, word: object, context: tuple) -> float:
        if not context:
            total = sum(self.a[g] for g in self.followers[()])
            gamma = sum(self.discount(1, self.a[g]) for g in self.followers[()]) / total
            a = self.a.get((word,), 0)
            return max(a - self.discount(1, a), 0) / total + gamma / self.vocab
        lower = self.p(word, context[1:])
        grams = self.followers.get(context, [])
        if not grams:
            return lower
        k = len(context) + 1
        total = sum(self.a[g] for g in grams)
        gamma = sum(self.discount(k, self.a[g]) for g in grams) / total
        a = self.a.get((*context, word), 0)
        return max(a - self.discount(k, a), 0) / total + gamma * lower

    def stream_probabilities(self, sentences: list[list[int]]) -> list[float]:
        found = []
        for s in sentences:
            padded: list[object] = ["<s>", *s, EOS]
            for i in range(1, len(padded)):
                found.append(self.p(padded[i], tuple(padded[max(0, i - self.order + 1) : i])))
        return found


@pytest.mark.parametrize("order", [2, 3, 5])
def test_the_arrays_compute_the_formulas(order):
    train, held_out = _sentences(3000, 0), _sentences(200, 1)
    kn = KneserNey.fit(KneserNeyConfig(order=order), _stream(train), V)
    reference = Reference(train, order, V)
    for k in range(1, order + 1):  # estimated, not the fallback of a corpus too small for counts of counts
        np.testing.assert_allclose(kn.discounts[k - 1], reference.d[k], rtol=1e-12)
    expected = reference.stream_probabilities(held_out + train[:50])
    np.testing.assert_allclose(kn.probabilities(_stream(held_out + train[:50])), expected, rtol=1e-10)


def _arpa(path: Path) -> dict[tuple[str, ...], tuple[float, float]]:
    """An ARPA file's n-grams: (log10 p, log10 backoff)."""
    grams = {}
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and not line.startswith("ngram"):
            grams[tuple(parts[1].split(" "))] = (float(parts[0]), float(parts[2]) if len(parts) > 2 else 0.0)
    return grams


def _arpa_p(grams: dict, word: str, context: tuple[str, ...]) -> float:
    """p(word | context) as an ARPA model answers: the n-gram's probability, else the context's backoff times
    the shorter context's answer."""
    gram = (*context, word)
    if gram in grams:
        return 10 ** grams[gram][0]
    return 10 ** grams.get(context, (0.0, 0.0))[1] * _arpa_p(grams, word, context[1:])


def test_kenlm_estimates_the_same_model():
    """``tests/data/kenlm-3gram.arpa`` is what KenLM 0.3.0's ``lmplz -o 3 -S 100M`` wrote for
    ``tests/data/kenlm-corpus.txt`` (300 lines of 56 words, drawn by a seeded Zipf sampler; ``benchmarks/lm_race.py
    --build-kenlm DIR`` builds lmplz); seqlab's model of the same corpus gives every word of the held-out lines,
    seen n-grams and unseen ones, the same probability (the unigrams' uniform share aside: KenLM spreads it over
    its own vocabulary, with <s> and <unk>, here over seqlab's ids)."""
    lines = (DATA / "kenlm-corpus.txt").read_text().splitlines()
    words = sorted({w for line in lines for w in line.split()})
    ids = {w: i + 4 for i, w in enumerate(words)}
    vocab = len(words) + 4
    grams = _arpa(DATA / "kenlm-3gram.arpa")
    kn = KneserNey.fit(KneserNeyConfig(order=3), _stream([[ids[w] for w in line.split()] for line in lines]), vocab)
    held_out = lines[:5] + ["a b c", "c a b b"]
    ours = kn.probabilities(_stream([[ids[w] for w in line.split()] for line in held_out]))
    theirs = []
    for line in held_out:
        padded = ["<s>", *line.split(), "</s>"]
        theirs += [_arpa_p(grams, padded[i], tuple(padded[max(0, i - 2) : i])) for i in range(1, len(padded))]
    np.testing.assert_allclose(ours, theirs, rtol=1e-3)  # 8e-4 at most: the uniform share over 60 ids, not 59


def test_every_context_is_a_distribution_and_agrees_with_the_stream():
    train = _sentences(500, 2)
    kn = KneserNey.fit(KneserNeyConfig(order=4), _stream(train), V)
    stream = _stream(_sentences(30, 3))
    p = kn.probabilities(stream)
    for j in range(len(stream) - 1):
        [row] = kn.distribution(_context(list(stream[: j + 1]), kn)[None])
        assert row.sum() == pytest.approx(1.0, abs=1e-12) and row.min() > 0
        assert row[stream[j + 1]] == pytest.approx(p[j], rel=1e-12)


def test_a_sentence_never_reaches_into_the_one_before():
    kn = KneserNey.fit(KneserNeyConfig(order=5), _stream(_sentences(500, 2)), V)
    second = [5, 6, 7]
    alone = kn.probabilities(_stream([second]))
    after = kn.probabilities(_stream([[9, 10, 11, 12], second]))
    np.testing.assert_array_equal(after[-len(alone):], alone)
    contexts = np.array([[4, 5, 6, 7]])
    moved = _extend(contexts, np.array([EOS]), kn.bos)  # an <eos> opens a new sentence
    np.testing.assert_array_equal(moved, [[-1, -1, -1, kn.bos]])
    np.testing.assert_array_equal(kn.distribution(moved), kn.distribution(_context([EOS], kn)[None]))


def test_the_saved_state_gives_the_same_model(tmp_path):
    from seqlab.predictors.base import saved_ngrams
    from seqlab.rundir import RunDir, RunFileError

    kn = KneserNey.fit(KneserNeyConfig(order=3, weight=0.7), _stream(_sentences(300, 4)), V)
    run = RunDir(tmp_path)
    run.save_ngrams(*kn.state())
    back = saved_ngrams(run, KneserNey, KneserNeyConfig(order=3, weight=0.7))
    stream = _stream(_sentences(20, 5))
    np.testing.assert_array_equal(back.probabilities(stream), kn.probabilities(stream))
    assert back.fit_seconds == kn.fit_seconds
    with pytest.raises(RunFileError, match=r"ngrams.safetensors: not the n-gram model of this model.ngrams \(saved: "
                                           r"kneser_ney of order 3; model.ngrams asks for kneser_ney of order 4\)"):
        saved_ngrams(run, KneserNey, KneserNeyConfig(order=4))


def test_interpolation_is_the_weighted_mixture_of_probabilities():
    kn = KneserNey.fit(KneserNeyConfig(order=3, weight=0.75), _stream(_sentences(300, 4)), V)
    stream = _stream(_sentences(10, 6))
    net = np.log(np.random.default_rng(0).uniform(0.01, 1, len(stream) - 1))
    expected = np.log(0.75 * np.exp(net) + 0.25 * kn.probabilities(stream))
    np.testing.assert_allclose(kn.interpolate(net, stream), expected, rtol=1e-12)
    assert math.isclose(KneserNeyConfig().weight, 0.8) and KneserNeyConfig().order == 5
    with pytest.raises(ValueError, match="order"):
        KneserNeyConfig(order=1)


def test_discounts_out_of_reach_of_the_counts_fall_back_as_kenlm_does():
    from seqlab.model.kneser_ney import _discounts

    np.testing.assert_array_equal(_discounts(np.array([1.0, 1, 2, 3])), [0, 0.5, 1, 1.5])  # no count of 4
    np.testing.assert_array_equal(_discounts(np.array([1.0, 2, *[3] * 10, 4])), [0, 0.5, 1, 1.5])  # D_2 = -8
    kn = KneserNey.fit(KneserNeyConfig(order=3), _stream([[4, 5, 6], [5, 6, 7], [4, 6]]), 8)  # a toy corpus
    for context in ([-1, kn.bos], [kn.bos, 4], [4, 5]):
        [row] = kn.distribution(np.array([context]))
        assert row.sum() == pytest.approx(1.0, abs=1e-12) and row.min() > 0

"""An n-gram head beside a classifier's encoder: TF-IDF features and a logistic regression (scikit-learn's), whose
class probabilities are averaged with the encoder's.

    text ─┬─ tokens ─ encoder ─ softmax ───────────────────────────────── p_enc ───┬─ w·p_enc + (1-w)·p_ngram
          └─ TF-IDF (character n-grams in words ⊕ word n-grams) ─ LR ─ p_ngram ───┘

The two read a question differently: the encoder its subword tokens in order, the head which character and word
n-grams it holds, weighted by tf-idf (sublinear tf: 1 + log tf; idf: log((1 + n) / (1 + df)) + 1; each analyzer's
row L2-normalised). The head is fitted once on the training split's texts (lbfgs to convergence, C its inverse L2
weight), before the encoder's first epoch; training then validates and picks the best epoch by the average, so the
model that is kept is the pair. ``benchmarks/select_tfidf.py`` builds the same features for the TF-IDF peer alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, model_validator

from seqlab.sections import Section

if TYPE_CHECKING:  # scikit-learn and SciPy load where a head is fitted or read back: 1.4 s of every process's start
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfVectorizer

Analyzer = Literal["char_wb", "word"]
WORD_PATTERN = r"(?u)\b\w+\b"  # one-character words count too (Korean's are short)


def vectorizer(analyzer: Analyzer, ngram_range: tuple[int, int], vocabulary: Sequence[str] | None = None
               ) -> TfidfVectorizer:
    """scikit-learn's TF-IDF over character n-grams inside words (``char_wb``) or word n-grams, sublinear tf; with
    ``vocabulary``, its features fixed (their idf still to set)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    words = {"token_pattern": WORD_PATTERN} if analyzer == "word" else {}
    return TfidfVectorizer(analyzer=analyzer, ngram_range=ngram_range, sublinear_tf=True, vocabulary=vocabulary,
                           **words)


class NgramConfig(Section):
    """``model.ngrams``: the n-gram head's features, its regularisation and its share of the average."""

    char: tuple[int, int] | None = Field((2, 5), description="character n-grams inside words, from and to (null: none)")
    word: tuple[int, int] | None = Field((1, 2), description="word n-grams, from and to (null: none)")
    C: float = Field(30.0, gt=0, description="the logistic regression's inverse L2 weight (scikit-learn's C)")
    weight: float = Field(0.5, gt=0, lt=1, description="the encoder's share of the averaged probabilities; the "
                                                       "head's is 1 - weight")

    @model_validator(mode="after")
    def _some_features(self) -> NgramConfig:
        ranges = [r for r in (self.char, self.word) if r is not None]
        if not ranges:
            raise ValueError("model.ngrams needs char or word n-grams (or model.ngrams: null for no head)")
        if any(not 1 <= low <= high for low, high in ranges):
            raise ValueError(f"model.ngrams: an n-gram range is [from, to] with 1 <= from <= to, got {ranges}")
        return self

    def analyzers(self) -> list[tuple[Analyzer, tuple[int, int]]]:
        named: list[tuple[Analyzer, tuple[int, int] | None]] = [("char_wb", self.char), ("word", self.word)]
        return [(name, r) for name, r in named if r is not None]


class NgramHead:
    """Fitted TF-IDF features and a multinomial logistic regression over them: ``probabilities(texts)``."""

    def __init__(self, cfg: NgramConfig, vectorizers: list[TfidfVectorizer], coef: np.ndarray, intercept: np.ndarray,
                 fit_seconds: float) -> None:
        self.cfg = cfg
        self.vectorizers = vectorizers
        self.coef = coef  # (classes, features)
        self.intercept = intercept  # (classes,)
        self.fit_seconds = fit_seconds

    @classmethod
    def fit(cls, cfg: NgramConfig, texts: Sequence[str], labels: np.ndarray, num_classes: int) -> NgramHead:
        """The features learnt from ``texts`` (vocabulary and idf), the regression fitted on them and ``labels``
        (class indices 0 … ``num_classes`` - 1, each present: the classes are the training split's)."""
        import scipy.sparse as sp
        from sklearn.linear_model import LogisticRegression

        start = time.perf_counter()
        vectorizers = [vectorizer(analyzer, r) for analyzer, r in cfg.analyzers()]
        features = sp.hstack([v.fit_transform(texts) for v in vectorizers]).tocsr()  # (texts, features)
        regression = LogisticRegression(C=cfg.C, max_iter=2000).fit(features, labels)
        assert list(regression.classes_) == list(range(num_classes)), "every class has a training text"
        coef, intercept = regression.coef_, regression.intercept_  # (classes, features), (classes,)
        if num_classes == 2:  # scikit-learn keeps one row for two classes: the second's log-odds against the first
            coef, intercept = np.vstack([np.zeros_like(coef), coef]), np.concatenate([[0.0], intercept])
        return cls(cfg, vectorizers, coef, intercept, time.perf_counter() - start)

    def describe(self) -> str:
        return f"n-gram head: {self.coef.shape[1]:,} features"

    def features(self, texts: Sequence[str]) -> sp.csr_matrix:
        """(texts, features) TF-IDF rows, each analyzer's L2-normalised, side by side."""
        import scipy.sparse as sp

        return sp.hstack([v.transform(texts) for v in self.vectorizers]).tocsr()

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """(texts, classes) softmax of the regression's scores."""
        scores = self.features(texts) @ self.coef.T + self.intercept  # (texts, classes)
        scores = np.asarray(scores) - np.max(scores, axis=1, keepdims=True)
        exp = np.exp(scores)
        return exp / exp.sum(1, keepdims=True)

    def average(self, encoder: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """The encoder's (texts, classes) probabilities averaged with the head's: weight · p_enc + (1 - weight) ·
        p_ngram."""
        return self.cfg.weight * encoder + (1 - self.cfg.weight) * self.probabilities(texts)

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, str]]:
        """Arrays (idf per analyzer, coef, intercept) and the JSON metadata (vocabularies, fit seconds) that
        ``from_state`` rebuilds the head from: what the run directory stores (safetensors, no pickle)."""
        arrays = {f"idf.{i}": np.asarray(v.idf_, dtype=np.float64) for i, v in enumerate(self.vectorizers)}
        arrays |= {"coef": self.coef, "intercept": self.intercept}
        meta = {"vocabularies": [v.get_feature_names_out().tolist() for v in self.vectorizers],
                "fit_seconds": self.fit_seconds}
        return arrays, {"ngrams": json.dumps(meta, ensure_ascii=False)}

    @classmethod
    def from_state(cls, cfg: NgramConfig, arrays: dict[str, np.ndarray], metadata: dict[str, Any]) -> NgramHead:
        """The head ``state`` described; a ``ValueError`` if it does not fit ``cfg``'s analyzers."""
        vocabularies = metadata["vocabularies"]
        analyzers = cfg.analyzers()
        if len(vocabularies) != len(analyzers) or any(f"idf.{i}" not in arrays for i in range(len(analyzers))):
            raise ValueError(f"fitted for {len(vocabularies)} analyzers, model.ngrams has {len(analyzers)}")
        vectorizers = []
        for i, ((analyzer, r), vocabulary) in enumerate(zip(analyzers, vocabularies)):
            v = vectorizer(analyzer, r, vocabulary)
            v.idf_ = arrays[f"idf.{i}"]
            vectorizers.append(v)
        if arrays["coef"].shape[1] != sum(len(v) for v in vocabularies):
            raise ValueError(f"coef has {arrays['coef'].shape[1]} features, the vocabularies {sum(map(len, vocabularies))}")
        return cls(cfg, vectorizers, arrays["coef"], arrays["intercept"], float(metadata["fit_seconds"]))

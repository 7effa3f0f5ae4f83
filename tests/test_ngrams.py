"""The classifier's n-gram head (seqlab.model.ngrams): TF-IDF + logistic regression held against scikit-learn's own
pipeline, stored without pickle and read back to the same probabilities (a classifier trained with it:
tests/test_classifier.py)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion, make_pipeline

from seqlab.model.ngrams import NgramConfig, NgramHead

TEXTS = ["오늘 날씨 정말 좋다", "헤어진 지 한 달 됐어", "좋아하는 사람 생겼어", "주말에 뭐 먹을까", "이별이 너무 힘들어",
         "고백하고 싶어", "점심 메뉴 추천해줘", "전 애인 연락 왔어", "짝사랑 그만하고 싶다", "비 온다 우산 챙겨"]
LABELS = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
UNSEEN = ["사랑 고백 날씨", "연락 없는 전 애인", "완전히 새로운 문장", ""]


def _sklearn(cfg: NgramConfig, labels: np.ndarray):
    """The same features and regression as scikit-learn's pipeline writes them (the reference)."""
    union = [("char", TfidfVectorizer(analyzer="char_wb", ngram_range=cfg.char, sublinear_tf=True))] if cfg.char else []
    if cfg.word:
        union.append(("word", TfidfVectorizer(analyzer="word", ngram_range=cfg.word, sublinear_tf=True,
                                              token_pattern=r"(?u)\b\w+\b")))
    return make_pipeline(FeatureUnion(union), LogisticRegression(C=cfg.C, max_iter=2000)).fit(TEXTS, labels)


@pytest.mark.parametrize("cfg", [NgramConfig(), NgramConfig(char=None, C=3.0), NgramConfig(word=None, char=(1, 3))])
def test_the_heads_probabilities_are_scikit_learns(cfg):
    head = NgramHead.fit(cfg, TEXTS, LABELS, 3)
    np.testing.assert_allclose(head.probabilities(TEXTS + UNSEEN), _sklearn(cfg, LABELS).predict_proba(TEXTS + UNSEEN),
                               rtol=1e-9, atol=1e-12)


def test_two_classes_keep_one_row_each():
    labels = LABELS % 2
    head = NgramHead.fit(NgramConfig(), TEXTS, labels, 2)
    assert head.coef.shape[0] == 2
    np.testing.assert_allclose(head.probabilities(UNSEEN), _sklearn(NgramConfig(), labels).predict_proba(UNSEEN),
                               rtol=1e-9, atol=1e-12)


def test_the_average_weighs_the_encoder_by_its_share():
    head = NgramHead.fit(NgramConfig(weight=0.7), TEXTS, LABELS, 3)
    encoder = np.tile([[1.0, 0.0, 0.0]], (len(UNSEEN), 1))
    np.testing.assert_allclose(head.average(encoder, UNSEEN), 0.7 * encoder + 0.3 * head.probabilities(UNSEEN))
    np.testing.assert_allclose(head.average(encoder, UNSEEN).sum(1), 1.0)


def test_the_stored_head_gives_the_same_probabilities(tmp_path):
    from seqlab.rundir import RunDir, RunFileError

    cfg = NgramConfig(char=(1, 4))
    head = NgramHead.fit(cfg, TEXTS, LABELS, 3)
    run = RunDir(tmp_path)
    run.save_ngrams(*head.state())
    back = NgramHead.from_state(cfg, *run.ngrams())
    np.testing.assert_array_equal(back.probabilities(TEXTS + UNSEEN), head.probabilities(TEXTS + UNSEEN))
    assert back.fit_seconds == head.fit_seconds
    with pytest.raises(ValueError, match="fitted for 2 analyzers, model.ngrams has 1"):
        NgramHead.from_state(NgramConfig(word=None), *run.ngrams())
    path = tmp_path / "ngrams.safetensors"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(RunFileError, match=r"ngrams.safetensors: not a seqlab n-gram model \(damaged or truncated"):
        run.ngrams()
    path.unlink()
    with pytest.raises(FileNotFoundError, match="ngrams.safetensors: missing"):
        run.ngrams()


def test_the_config_refuses_a_head_without_features():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="needs char or word n-grams"):
        NgramConfig(char=None, word=None)
    with pytest.raises(ValidationError, match="1 <= from <= to"):
        NgramConfig(char=(3, 2))
    with pytest.raises(ValidationError, match="less than 1"):
        NgramConfig(weight=1.0)

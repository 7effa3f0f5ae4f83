"""Scores: of decoded text against references, exact match and corpus BLEU (sacrebleu); of class predictions,
accuracy, precision, recall, F1 and the confusion matrix (seed 002 §10.2); of extracted answers, SQuAD's exact
match and token F1 (S102)."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from sacrebleu.metrics import BLEU


def seen_form(text: str) -> str:
    """The form in which a text counts as *seen in training*: lower-cased, its runs of whitespace one space, no
    space at either end. "SEPTEMBER 27, 1994" and "september  27, 1994" are one source; the built-in tasks draw no
    two sources of one form, and ``seqlab eval``'s unseen subsets compare in it."""
    return " ".join(text.lower().split())


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Percentage of outputs identical to their reference (the book's accuracy)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    if not references:
        return 0.0
    return 100.0 * sum(h == r for h, r in zip(hypotheses, references)) / len(references)


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], lowercase: bool = False) -> float:
    """sacreBLEU with its default 13a tokenisation, on detokenised text; ``lowercase`` compares lower-cased
    text, the way the classic tutorials score Multi30k (bentrevett: lower-cased tokens)."""
    return BLEU(lowercase=lowercase).corpus_score(list(hypotheses), [list(references)]).score


def bleu_signature(lowercase: bool = False) -> str:
    """sacreBLEU's signature of ``corpus_bleu`` (one reference per sentence), to report next to its scores."""
    bleu = BLEU(lowercase=lowercase)
    bleu.corpus_score(["-"], [["-"]])  # the signature names the reference count, known after scoring
    return str(bleu.get_signature())


# --- classification (seed 002 §10.2, S101) ---------------------------------------------------------------


def confusion_matrix(true: Sequence[int], predicted: Sequence[int], num_classes: int) -> np.ndarray:
    """(classes, classes) counts: row = the true class, column = the predicted one. For two classes with 1 as
    the positive one, ``[[TN, FP], [FN, TP]]``."""
    if len(true) != len(predicted):
        raise ValueError(f"{len(predicted)} predictions for {len(true)} true labels")
    matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(matrix, (np.asarray(true, dtype=np.int64), np.asarray(predicted, dtype=np.int64)), 1)
    return matrix


def _ratio(numerator: np.ndarray | int, denominator: np.ndarray | int) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0 (a class never predicted has precision 0)."""
    num, den = np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def f1(precision: np.ndarray, recall: np.ndarray) -> np.ndarray:
    """The harmonic mean 2PR / (P + R): unlike the arithmetic mean it stays low when either is low
    (P 0.9, R 0.1: mean 0.5, F1 0.18)."""
    return _ratio(2 * precision * recall, precision + recall)


def classification_scores(true: Sequence[int], predicted: Sequence[int], labels: Sequence[str]) -> dict[str, Any]:
    """Accuracy, precision, recall and F1 of class predictions, all in percent (as exact match and BLEU).

    Per class c, from the confusion matrix: TP = predicted c and truly c, FP = predicted c but not, FN = truly c
    but not predicted; precision = TP / (TP + FP), recall = TP / (TP + FN), F1 = 2PR / (P + R); accuracy =
    correct / all (for two classes (TP + TN) / (TP + FP + TN + FN)). Macro: the mean over classes of each score
    (every class counts the same); micro: the scores of the summed TP, FP, FN (for one label per input, micro
    precision = recall = F1 = accuracy). Keys: accuracy, macro_precision, macro_recall, macro_f1,
    micro_precision, micro_recall, micro_f1, per_class {label: precision, recall, f1, support}, labels and
    confusion (rows true, columns predicted)."""
    matrix = confusion_matrix(true, predicted, len(labels))
    tp = np.diag(matrix)
    predicted_as, truly = matrix.sum(0), matrix.sum(1)  # TP + FP, TP + FN per class
    precision, recall = _ratio(tp, predicted_as), _ratio(tp, truly)
    scores = f1(precision, recall)
    micro_p, micro_r = _ratio(tp.sum(), predicted_as.sum()), _ratio(tp.sum(), truly.sum())
    return {
        "accuracy": 100 * float(_ratio(tp.sum(), matrix.sum())),
        "macro_precision": 100 * float(precision.mean()),
        "macro_recall": 100 * float(recall.mean()),
        "macro_f1": 100 * float(scores.mean()),
        "micro_precision": 100 * float(micro_p),
        "micro_recall": 100 * float(micro_r),
        "micro_f1": 100 * float(f1(micro_p, micro_r)),
        "per_class": {label: {"precision": 100 * float(p), "recall": 100 * float(r), "f1": 100 * float(f),
                              "support": int(n)}
                      for label, p, r, f, n in zip(labels, precision, recall, scores, truly)},
        "labels": list(labels),
        "confusion": matrix.tolist(),
    }


# --- extracted answers (SQuAD v1.1's evaluation script, S102) -------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation: lowercase, ASCII punctuation removed, the articles a/an/the removed, runs of
    whitespace made one space."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_f1(prediction: str, truth: str) -> float:
    """SQuAD's token F1: precision and recall of the normalised answers' words (shared words counted with
    their multiplicity); two empty answers agree."""
    predicted, true = normalize_answer(prediction).split(), normalize_answer(truth).split()
    if not predicted or not true:
        return float(predicted == true)
    same = sum((Counter(predicted) & Counter(true)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(true)
    return 2 * precision * recall / (precision + recall)


def span_scores(predictions: Sequence[str], answers: Sequence[Sequence[str]]) -> dict[str, float]:
    """{'exact_match', 'f1'} in percent: for each question the best over its reference answers of exact match
    (after ``normalize_answer``) and of ``answer_f1``, averaged over the questions (SQuAD v1.1's script)."""
    if len(predictions) != len(answers):
        raise ValueError(f"{len(predictions)} predictions for {len(answers)} questions")
    if not answers:
        return {"exact_match": 0.0, "f1": 0.0}
    exact = [max(normalize_answer(p) == normalize_answer(a) for a in refs) for p, refs in zip(predictions, answers)]
    f1s = [max(answer_f1(p, a) for a in refs) for p, refs in zip(predictions, answers)]
    return {"exact_match": 100.0 * sum(exact) / len(exact), "f1": 100.0 * sum(f1s) / len(f1s)}

"""Scores of decoded text against references: exact match and corpus BLEU (sacrebleu)."""

from __future__ import annotations

from collections.abc import Sequence

import sacrebleu


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Percentage of outputs identical to their reference (the book's accuracy)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    if not references:
        return 0.0
    return 100.0 * sum(h == r for h, r in zip(hypotheses, references)) / len(references)


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """sacreBLEU with its default 13a tokenisation, on detokenised text."""
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score

"""Scores of decoded text against references: exact match and corpus BLEU (sacrebleu)."""

from __future__ import annotations

from collections.abc import Sequence

from sacrebleu.metrics import BLEU


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

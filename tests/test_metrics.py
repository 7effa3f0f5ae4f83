"""Exact match and sacreBLEU, cased and lower-cased."""

import pytest
import sacrebleu

from seqlab.metrics import bleu_signature, corpus_bleu, exact_match


def test_exact_match_counts_identical_outputs():
    assert exact_match(["a", "b", "c", "d"], ["a", "x", "c", "y"]) == 50.0
    with pytest.raises(ValueError, match="3 hypotheses for 2 references"):
        exact_match(["a", "b", "c"], ["a", "b"])


def test_bleu_is_sacrebleus_and_lowercase_ignores_case():
    hyps = ["A man rides a Horse on the beach.", "Two dogs play in the snow."]
    refs = ["A man is riding a horse on the beach.", "two dogs play in the snow ."]
    assert corpus_bleu(hyps, refs) == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert corpus_bleu(hyps, refs, lowercase=True) > corpus_bleu(hyps, refs)
    assert corpus_bleu([h.upper() for h in hyps], refs, lowercase=True) == corpus_bleu(hyps, refs, lowercase=True)
    assert "case:lc" in bleu_signature(lowercase=True) and "case:mixed" in bleu_signature()

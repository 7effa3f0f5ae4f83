"""Korean morpheme boundaries for subword tokenizers (``tokens.*.morphemes: true``), found by kiwipiepy.

Korean glues particles and endings onto words: 학교에 (school + "to"), 갔었어요 (went + past + polite).
A subword vocabulary learned on whole words spends ids on word + particle combinations; cutting the
words at their morpheme boundaries first lets BPE or WordPiece learn 학교 and 에 once each.

The text itself is never changed. Kiwi's analysis only says *where* to cut: :func:`mark_boundaries`
inserts :data:`MARK` (a private-use character) between two morphemes that sit side by side inside a
word, and the tokenizer's pre-tokeniser cuts there and drops the mark. Morphemes that Kiwi restores
from one contracted syllable (갔 = 가 + 았) overlap in the text and are not cut. So decoding, which
only concatenates pieces, gives back the original text exactly, and no analyser is needed to decode.

Kiwi is optional (``pip install 'seqlab[korean]'``, about 100 MB with its model); it is loaded once,
on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

MARK = "\ue000"  # U+E000, private use: never in real text (and removed from input before marking)


@cache
def _kiwi() -> Any:
    try:
        from kiwipiepy import Kiwi
    except ImportError:
        raise RuntimeError(
            "tokens.*.morphemes needs the Korean morpheme analyser kiwipiepy: pip install 'seqlab[korean]'"
        ) from None
    return Kiwi()


def mark_boundaries(texts: Sequence[str]) -> list[str]:
    """Each text with :data:`MARK` between adjacent morphemes of a word, e.g. ``"학교에 갔었어요"`` ->
    ``"학교\\ue000에 갔었\\ue000어요"``. Only cuts between two letters or digits are marked (punctuation is
    split off by the pre-tokeniser anyway); any :data:`MARK` already in a text is removed first."""
    texts = [t.replace(MARK, "") for t in texts]
    analyses = _kiwi().tokenize(texts)  # one list of tokens (form, start, len) per text, in order
    return [_insert(text, tokens) for text, tokens in zip(texts, analyses)]


def _insert(text: str, tokens: Sequence[Any]) -> str:
    cuts: list[int] = []
    for previous, token in zip(tokens, tokens[1:]):
        at = token.start
        adjacent = previous.start + previous.len == at  # side by side in the text: no space, no overlap
        new = not cuts or cuts[-1] != at  # a morpheme of no surface length (뭐 = 무엇 + 이) cuts once
        if adjacent and new and 0 < at < len(text) and text[at - 1].isalnum() and text[at].isalnum():
            cuts.append(at)
    pieces = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)])]
    return MARK.join(pieces)

"""The canonical form of a text, which every tokenizer level, every comparison and every look-up of a word uses.

The form:

1. Unicode NFC (Korean typed or pasted in NFD becomes precomposed syllables);
2. lowercase, when ``cfg.lowercase`` (then NFC again: lowercasing can make a
   composable pair, e.g. ``"J\u030c"`` -> ``"\u01f0"``);
3. every run of whitespace (what ``str.split()`` splits on: spaces, tabs,
   newlines, NBSP, ideographic space, ...) becomes one ASCII space, and
   leading/trailing whitespace is removed.

It is done in Python (``unicodedata`` + ``str.split``), before the
``tokenizers`` pipeline, because that is ~10x cheaper than the equivalent
``tokenizers`` normalisers (which dominated the cost of encoding short strings).

``normalize_with_offsets`` also keeps, for each character of the form, the characters of the text it came
from (a span extractor's answers are cut out of the text as given).
"""

from __future__ import annotations

import re
import unicodedata


def normalize(text: str, lowercase: bool = False) -> str:
    """The canonical form of ``text``: NFC, optionally lowercased, single spaces, no outer spaces."""
    text = unicodedata.normalize("NFC", text)
    if lowercase:
        text = unicodedata.normalize("NFC", text.lower())
    return " ".join(text.split())


Span = tuple[int, int]  # [start, end) character positions


def normalize_with_offsets(text: str, lowercase: bool = False) -> tuple[str, list[Span]]:
    """``normalize(text)`` and, for each of its characters, the span of ``text`` it came from: a run of whitespace
    becomes one space whose span is empty (at the next word), a character NFC composed from several takes all of
    theirs, and characters that one character became (lowercase ``"İ"``) share its span."""
    parts: list[str] = []
    spans: list[Span] = []
    for word in re.finditer(r"\S+", text):  # what str.split() splits on is what \s matches
        if parts:
            parts.append(" ")
            spans.append((word.start(), word.start()))
        piece = normalize(word.group(), lowercase)
        parts.append(piece)
        spans += [(word.start() + a, word.start() + b) for a, b in _char_spans(word.group(), piece, lowercase)]
    return "".join(parts), spans


def _char_spans(word: str, piece: str, lowercase: bool) -> list[Span]:
    """For each character of ``piece`` (``word`` normalised, no whitespace), its span in ``word``: character k
    for k when normalising changed at most the case of each character; else the shortest prefix of ``word``
    whose normal form reaches it."""
    cased = word.lower() if lowercase else word
    if piece == cased and len(cased) == len(word):
        return [(k, k + 1) for k in range(len(word))]
    spans: list[Span] = []
    start = end = 0
    for j in range(len(piece)):
        before = end
        while end < len(word) and normalize(word[:end], lowercase)[: j + 1] != piece[: j + 1]:
            end += 1
        if end > before:  # a new character of word; else the one before became several
            start = before
        spans.append((start, end))
    return spans

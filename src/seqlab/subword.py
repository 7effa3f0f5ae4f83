"""Subword vocabulary learning as seed 002 §10.1 teaches it for BERT (inventory S97), and WordPiece
tokenising with that vocabulary (S98): the readable reference.

seqlab trains and serves its ``bpe``/``wordpiece`` tokens with Hugging Face ``tokenizers``
(:mod:`seqlab.tokenizer`); this module is the algorithm itself, in plain Python, step by step:

1. split every word into characters; a piece that does not start its word carries the
   ``##`` prefix, because "the same character at the start of a word and elsewhere are assumed
   to differ" ('철' ≠ '##철', '철창살' ≠ '##철창살')                         -> :func:`split_word`
2. count the adjacent pairs of pieces over the corpus ("bi-gram pair count")  -> :func:`pair_counts`
3. merge the best pair -- one only, "even if several are best" (ties: the pair seen first in
   the corpus)                                                               -> :func:`best_pair`, :func:`merge`
4. repeat for a fixed number of iterations                                   -> :func:`learn`
5. build the vocabulary once, after all iterations, from the tokenised corpus
   ("not at every iteration")                                                -> :func:`build_vocab`

The seed's corpus ``경찰청 철창살은 외철창살이고 검찰청 철창살은 쌍철창살이다`` learns
``##창 ##살 -> ##창살`` (count 4), ``##찰 ##청 -> ##찰청`` and ``철 ##창살 -> 철창살`` (ties at 2), and
the vocabulary ``경 ##찰청 철창살 ##은 외 ##철 ##창살 ##이 ##고 검 쌍 ##다``.

Tokenising (:func:`tokenize_word`, :func:`tokenize`) is BERT's WordPiece: greedy longest match first,
``##`` on the pieces after the first; "a word the vocabulary does not cover even after subword
splitting becomes ``[UNK]``" -- the whole word, as in BERT and ``tokenizers.models.WordPiece``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_INPUT_CHARS_PER_WORD", "PREFIX", "UNK", "Learnt", "apply_merges", "best_pair", "build_vocab", "join",
           "learn", "merge", "merge_word", "pair_counts", "split_word", "tokenize", "tokenize_word"]

PREFIX = "##"  # BERT's continuing-subword prefix: the piece does not start its word
UNK = "[UNK]"  # BERT's unknown token
MAX_INPUT_CHARS_PER_WORD = 100  # BERT's and tokenizers' default: a longer word is [UNK] at once

Pieces = tuple[str, ...]  # a word as its pieces, e.g. ("철", "##창", "##살", "##은")
Pair = tuple[str, str]  # two adjacent pieces, e.g. ("##창", "##살")


def split_word(word: str) -> Pieces:
    """Step 1: ``"철창살은"`` -> ``("철", "##창", "##살", "##은")``, every character a piece, ``##`` on all but the first."""
    return tuple(char if i == 0 else PREFIX + char for i, char in enumerate(word))


def join(a: str, b: str) -> str:
    """The piece that merging ``a`` and ``b`` makes: ``b`` loses its ``##`` and ``a`` keeps whatever it has,
    so ``("##창", "##살")`` -> ``"##창살"`` and ``("철", "##창살")`` -> ``"철창살"``."""
    return a + b.removeprefix(PREFIX)


def pair_counts(words: Mapping[Pieces, int]) -> Counter[Pair]:
    """Step 2: how often each pair of adjacent pieces occurs in the corpus, ``words`` being each distinct
    word's pieces and the word's frequency. The counter's order is the order in which the pairs first
    occur in the corpus (``words`` in first-occurrence order, each word left to right)."""
    counts: Counter[Pair] = Counter()
    for pieces, freq in words.items():
        for pair in zip(pieces, pieces[1:]):
            counts[pair] += freq
    return counts


def best_pair(counts: Counter[Pair], tie_break: Callable[[Pair], Any] | None = None) -> Pair | None:
    """Step 3's choice: the most frequent pair, one only; of several with the top count, the first in
    ``counts``' order (the corpus order, see :func:`pair_counts`), or the smallest ``tie_break(pair)`` if
    given. ``None`` when there is no pair left."""
    if not counts:
        return None
    top = max(counts.values())
    tied = [pair for pair, count in counts.items() if count == top]
    return tied[0] if tie_break is None else min(tied, key=tie_break)


def merge_word(pair: Pair, pieces: Pieces) -> Pieces:
    """``pair`` merged wherever it occurs in one word, left to right (``a a a`` with ``(a, a)`` -> ``aa a``)."""
    merged: list[str] = []
    i = 0
    while i < len(pieces):
        if i + 1 < len(pieces) and (pieces[i], pieces[i + 1]) == pair:
            merged.append(join(*pair))
            i += 2
        else:
            merged.append(pieces[i])
            i += 1
    return tuple(merged)


def merge(pair: Pair, words: Mapping[Pieces, int]) -> Counter[Pieces]:
    """Step 3's merge: every word with ``pair`` merged, frequencies and order unchanged."""
    return Counter({merge_word(pair, pieces): freq for pieces, freq in words.items()})


def build_vocab(words: Iterable[Pieces]) -> list[str]:
    """Step 5: the distinct pieces of the tokenised corpus, in the order they first occur."""
    return list(dict.fromkeys(piece for pieces in words for piece in pieces))


@dataclass(frozen=True)
class Learnt:
    """What :func:`learn` learnt."""

    merges: list[Pair]  # the pair merged at each iteration, in order
    counts: list[int]  # how often each of them occurred when it was merged (never increasing)
    words: Counter[Pieces]  # each distinct word of the corpus after the last merge, its frequency; corpus order
    vocab: list[str]  # build_vocab(words): built once, after all iterations


def learn(corpus: Iterable[str], n_iter: int, tie_break: Callable[[Pair], Any] | None = None) -> Learnt:
    """Steps 1-5 on ``corpus`` (texts, split into words on whitespace): ``n_iter`` merges of the best pair,
    fewer if the corpus runs out of pairs (every word a single piece). ``tie_break``: see :func:`best_pair`
    (Hugging Face's trainers, for one, take the pair of smallest token ids)."""
    words = Counter(split_word(word) for text in corpus for word in text.split())
    merges: list[Pair] = []
    counts: list[int] = []
    for _ in range(n_iter):
        pairs = pair_counts(words)
        pair = best_pair(pairs, tie_break)
        if pair is None:
            break
        merges.append(pair)
        counts.append(pairs[pair])
        words = merge(pair, words)
    return Learnt(merges=merges, counts=counts, words=words, vocab=build_vocab(words))


def apply_merges(word: str, merges: Iterable[Pair]) -> Pieces:
    """``word`` split and merged with ``merges`` in order: for a word of the corpus, its tokenisation after
    the last iteration of :func:`learn`."""
    pieces = split_word(word)
    for pair in merges:
        pieces = merge_word(pair, pieces)
    return pieces


def tokenize_word(word: str, vocab: Container[str], unk: str = UNK,
                  max_chars: int = MAX_INPUT_CHARS_PER_WORD) -> list[str]:
    """BERT's WordPiece: the longest prefix of ``word`` in ``vocab`` (a set or a dict, for speed), then the
    longest ``##``-prefixed continuation in ``vocab``, and so on: ``"playing"`` -> ``["play", "##ing"]``. If some
    part cannot be matched, or the word is longer than ``max_chars`` characters, the whole word is ``unk``."""
    if len(word) > max_chars:
        return [unk]
    pieces: list[str] = []
    start = 0
    while start < len(word):
        for end in range(len(word), start, -1):  # longest first
            piece = word[start:end] if start == 0 else PREFIX + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                start = end
                break
        else:  # no piece starting here is known
            return [unk]
    return pieces


def tokenize(text: str, vocab: Iterable[str], unk: str = UNK,
             max_chars: int = MAX_INPUT_CHARS_PER_WORD) -> list[str]:
    """Every whitespace-separated word of ``text`` through :func:`tokenize_word`:
    ``"He likes playing"`` -> ``["He", "likes", "play", "##ing"]``; only pieces of ``vocab``, or ``unk``."""
    known = set(vocab)
    return [piece for word in text.split() for piece in tokenize_word(word, known, unk, max_chars)]

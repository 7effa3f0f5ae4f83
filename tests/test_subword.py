"""Tests of seqlab.subword: seed 002 §10.1's subword vocabulary learning (S97) and WordPiece tokenising
with it (S98), on the seed's worked example and against Hugging Face ``tokenizers`` on a real corpus."""

from __future__ import annotations

import csv
import functools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from seqlab.subword import (
    UNK,
    Learnt,
    Pieces,
    apply_merges,
    build_vocab,
    join,
    learn,
    merge,
    merge_word,
    pair_counts,
    split_word,
    tokenize,
    tokenize_word,
)

SEED_CORPUS = "경찰청 철창살은 외철창살이고 검찰청 철창살은 쌍철창살이다"

# The seed's "Bi-gram Pair Count" of iteration 1, in the order the pairs first occur in the corpus.
SEED_ITER1_COUNTS = {("경", "##찰"): 1, ("##찰", "##청"): 2, ("철", "##창"): 2, ("##창", "##살"): 4,
                     ("##살", "##은"): 2, ("외", "##철"): 1, ("##철", "##창"): 2, ("##살", "##이"): 2,
                     ("##이", "##고"): 1, ("검", "##찰"): 1, ("쌍", "##철"): 1, ("##이", "##다"): 1}

# The seed's "Vocab (iter=n)" tables, read row by row.
SEED_VOCABS = {
    0: "경 ##찰 ##청 철 ##창 ##살 ##은 외 ##철 ##이 ##고 검 쌍 ##다",
    1: "경 ##찰 ##청 철 ##창살 ##은 외 ##철 ##이 ##고 검 쌍 ##다",
    2: "경 ##찰청 철 ##창살 ##은 외 ##철 ##이 ##고 검 쌍 ##다",
    3: "경 ##찰청 철창살 ##은 외 ##철 ##창살 ##이 ##고 검 쌍 ##다",
}


# -- the seed's worked example (S97) --------------------------------------------------------------------------


def test_split_word_prefixes_every_piece_but_the_first():
    assert split_word("철창살은") == ("철", "##창", "##살", "##은")
    assert split_word("외철창살이고")[1] == "##철" != "철"  # '철' ≠ '##철'
    assert split_word("a") == ("a",)
    assert split_word("") == ()


def test_merge_naming_rules():
    assert join("##a", "##b") == "##ab"
    assert join("a", "##b") == "ab"
    assert join("##창", "##살") == "##창살"
    assert join("철", "##창살") == "철창살"
    assert merge_word(("a", "##b"), ("a", "##b", "##a", "##b")) == ("ab", "##a", "##b")  # '##a' is not 'a'
    assert merge_word(("##a", "##b"), ("a", "##b", "##a", "##b")) == ("a", "##b", "##ab")
    assert merge_word(("##ㅋ", "##ㅋ"), split_word("ㅋㅋㅋㅋ")) == ("ㅋ", "##ㅋㅋ", "##ㅋ")  # left to right, no overlap


def test_the_seeds_iteration_1_pair_counts():
    words = Counter(split_word(w) for w in SEED_CORPUS.split())
    counts = pair_counts(words)
    assert dict(counts) == SEED_ITER1_COUNTS
    assert list(counts) == list(SEED_ITER1_COUNTS)  # first-occurrence order: the tie-break
    assert counts.most_common(2) == [(("##창", "##살"), 4), (("##찰", "##청"), 2)]  # the maximum, alone


def test_the_seeds_worked_example():
    learnt = learn([SEED_CORPUS], n_iter=3)
    assert learnt.merges == [("##창", "##살"), ("##찰", "##청"), ("철", "##창살")]
    assert learnt.counts == [4, 2, 2]  # iterations 2 and 3 are ties at 2: one pair only, the first in the corpus
    tokenised = [" ".join(apply_merges(w, learnt.merges)) for w in SEED_CORPUS.split()]
    assert " / ".join(tokenised) == ("경 ##찰청 / 철창살 ##은 / 외 ##철 ##창살 ##이 ##고 / 검 ##찰청 / 철창살 ##은 / "
                                     "쌍 ##철 ##창살 ##이 ##다")
    assert learnt.words == Counter(tuple(t.split()) for t in tokenised)
    assert list(learnt.words) == [tuple(t.split()) for t in dict.fromkeys(tokenised)]  # corpus order
    assert learnt.vocab == SEED_VOCABS[3].split()
    assert "##찰" not in learnt.vocab and "##청" not in learnt.vocab  # built once, after the iterations


@pytest.mark.parametrize("n_iter", sorted(SEED_VOCABS))
def test_the_seeds_vocabulary_after_each_number_of_iterations(n_iter):
    assert learn([SEED_CORPUS], n_iter).vocab == SEED_VOCABS[n_iter].split()


def test_merge_and_build_vocab_keep_frequencies_and_order():
    words: Counter[Pieces] = Counter({("b", "##a"): 1, ("a", "##b"): 3})
    merged = merge(("a", "##b"), words)
    assert list(merged.items()) == [(("b", "##a"), 1), (("ab",), 3)]
    assert build_vocab(merged) == ["b", "##a", "ab"]


def test_learn_stops_when_no_pair_is_left():
    learnt = learn(["ab a ab"], n_iter=10)
    assert learnt.merges == [("a", "##b")] and learnt.counts == [2]
    assert learnt.vocab == ["ab", "a"]


def test_tie_break_chooses_among_the_tied_pairs_only():
    prefer = ("철", "##창살")  # tied at 2 in iteration 2 with (##찰, ##청), which comes first in the corpus
    learnt = learn([SEED_CORPUS], 2, tie_break=lambda pair: pair != prefer)
    assert learnt.merges == [("##창", "##살"), prefer]  # iteration 1 has a unique best: no choice there


# -- tokenising with the vocabulary (S98) ---------------------------------------------------------------------


def test_he_likes_playing():
    vocab = ["He", "likes", "play", "##ing", "p", "##lay", "##i", "##n", "##g"]
    assert tokenize("He likes playing", vocab) == ["He", "likes", "play", "##ing"]  # longest match first
    assert tokenize_word("playing", {"play", "##in", "##g"}) == ["play", "##in", "##g"]


def test_a_word_the_vocabulary_cannot_cover_is_unk():
    vocab = {"He", "likes", "play", "##ing"}
    assert tokenize("He likes jumping", vocab) == ["He", "likes", UNK]  # no piece for 'j'
    assert tokenize_word("playful", vocab) == [UNK]  # the whole word, not 'play' + [UNK]
    assert tokenize_word("ingplay", vocab) == [UNK]  # '##'-less 'ing' and '##play' are not in the vocabulary
    assert tokenize_word("playful", vocab, unk="<unk>") == ["<unk>"]
    assert tokenize_word("", vocab) == []


def test_a_word_over_max_chars_is_unk():
    vocab = {"a", "##a"}
    assert tokenize_word("a" * 100, vocab) == ["a"] + ["##a"] * 99
    assert tokenize_word("a" * 101, vocab) == [UNK]
    assert tokenize_word("a" * 3, vocab, max_chars=2) == [UNK]


def test_tokenising_with_the_seeds_vocabulary():
    learnt = learn([SEED_CORPUS], n_iter=3)
    assert tokenize(SEED_CORPUS, learnt.vocab) == [p for w in SEED_CORPUS.split() for p in apply_merges(w, learnt.merges)]
    assert tokenize("경찰 철창", learnt.vocab) == [UNK, UNK]  # '##찰', '##창' left the vocabulary with the merges
    pieces = tokenize("검찰청 철창살이다 경찰청장", learnt.vocab)
    assert pieces == ["검", "##찰청", "철창살", "##이", "##다", UNK]
    assert set(pieces) <= set(learnt.vocab) | {UNK}


# -- against Hugging Face tokenizers on a real Korean corpus ----------------------------------------------------

ROW_STEP = 16  # every 16th row of ChatbotData.csv: 739 rows, their questions and answers (pure Python is slow)
N_MERGES = 200


@functools.cache
def _chatbot_texts(path: Path) -> tuple[str, ...]:
    """Every question and answer of ChatbotData.csv (columns Q, A, label), in file order."""
    with open(path / "chatbot_ko" / "ChatbotData.csv", encoding="utf-8", newline="") as f:
        return tuple(text for row in csv.DictReader(f) for text in (row["Q"], row["A"]))


def _subset(path: Path) -> list[str]:
    texts = _chatbot_texts(path)
    return [text for i in range(0, len(texts), 2 * ROW_STEP) for text in texts[i:i + 2]]


@functools.cache
def _learnt(path: Path) -> Learnt:
    return learn(_subset(path), N_MERGES)


def _alphabet_and_initial_pieces(texts: list[str]) -> tuple[set[str], set[str]]:
    """Every character (HF's alphabet, without '##'), and every piece of split_word (step 1)."""
    words = {w for text in texts for w in text.split()}
    return {c for w in words for c in w}, {p for w in words for p in split_word(w)}


def _hf_train(texts: list[str], trainer_name: str) -> Tokenizer:
    """HF's trainer on whitespace-split words, '##' continuation, no alphabet limit, min_frequency 1, no special
    tokens, and a vocabulary size that leaves room for exactly N_MERGES merges."""
    alphabet, initial = _alphabet_and_initial_pieces(texts)
    options: dict[str, Any] = dict(vocab_size=len(alphabet | initial) + N_MERGES, min_frequency=1, show_progress=False,
                   special_tokens=[], continuing_subword_prefix="##")
    trainer: trainers.Trainer
    if trainer_name == "bpe":
        tokenizer = Tokenizer(models.BPE(continuing_subword_prefix="##"))
        trainer = trainers.BpeTrainer(**options)
    else:
        tokenizer = Tokenizer(models.WordPiece(unk_token=UNK))
        trainer = trainers.WordPieceTrainer(**options)
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def _hf_merges(tokenizer: Tokenizer) -> list[tuple[str, str]]:
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    pairs = (m.split(" ") if isinstance(m, str) else m for m in merges)  # "a b", or ["a", "b"] in newer files
    return [(a, b) for a, b in pairs]


@pytest.mark.parametrize("trainer_name", ["bpe", "wordpiece"])
def test_learn_is_hugging_faces_trainer_but_for_ties(shared_data, trainer_name):
    """HF's BpeTrainer (and WordPieceTrainer, which is BPE training, then a WordPiece model over its vocabulary)
    merge the most frequent pair like ``learn``, but break ties by the smaller token ids, and number the '##'
    alphabet in hash order (so HF's own ties change from run to run). With HF's ids as ``tie_break``, ``learn``
    makes HF's merges exactly. HF's vocabulary also keeps every character and every piece a merge consumed;
    the seed builds it from the final tokenised corpus only."""
    texts = _subset(shared_data)
    hf = _hf_train(texts, trainer_name)
    ids = hf.get_vocab()
    replay = learn(texts, N_MERGES, tie_break=lambda pair: (ids.get(pair[0], len(ids)), ids.get(pair[1], len(ids))))
    assert len(replay.merges) == N_MERGES
    if trainer_name == "bpe":
        assert replay.merges == _hf_merges(hf)
    alphabet, initial = _alphabet_and_initial_pieces(texts)
    assert set(ids) == alphabet | initial | {join(*pair) for pair in replay.merges}
    assert set(replay.vocab) < set(ids)
    hf_only = set(ids) - set(replay.vocab)
    consumed = (initial | {join(*pair) for pair in replay.merges}) - set(replay.vocab)
    assert hf_only == consumed | (alphabet - set(replay.vocab))
    assert consumed  # e.g. '##떻' and '어떻' of '어떻게': only the merges' results are left of them


def test_learn_with_the_seeds_tie_break_differs_from_hf_at_a_tie_only(shared_data):
    texts = _subset(shared_data)
    learnt, hf = _learnt(shared_data), _hf_train(texts, "bpe")
    hf_merges = _hf_merges(hf)
    assert len(learnt.merges) == len(hf_merges) == N_MERGES
    same = next((i for i, (a, b) in enumerate(zip(learnt.merges, hf_merges)) if a != b), N_MERGES)
    assert same >= 11, same  # the eleven first best pairs (663, 221, 96, ..., 62 times) have no rival
    if same < N_MERGES:  # the first difference: two pairs of the same, top count
        words = Counter(split_word(w) for text in texts for w in text.split())
        for pair in learnt.merges[:same]:
            words = merge(pair, words)
        counts = pair_counts(words)
        assert counts[learnt.merges[same]] == counts[hf_merges[same]] == max(counts.values()) == learnt.counts[same]
    # after it, the two learn from different corpora (one tie, then other counts): the seed's pieces that HF lacks
    # come from its own later merges, and HF's vocabulary is still its alphabet, step 1's pieces and its merges
    assert set(learnt.vocab) - set(hf.get_vocab()) <= {join(*pair) for pair in learnt.merges[same:]}
    alphabet, initial = _alphabet_and_initial_pieces(texts)
    assert set(hf.get_vocab()) == alphabet | initial | {join(*pair) for pair in hf_merges}


def _words_to_tokenize(path: Path) -> list[str]:
    """Every distinct word of the whole corpus (most never seen in training, some with unseen characters), and words
    around WordPiece's 100-character limit."""
    words = dict.fromkeys(w for text in _chatbot_texts(path) for w in text.split())
    return [*words, "ㅋ" * 100, "ㅋ" * 101, "ㅋㅋ" * 60]


@pytest.mark.parametrize("vocabulary", ["seed", "hf"])
def test_tokenize_is_hugging_faces_wordpiece(shared_data, vocabulary):
    """``tokenize_word`` and ``tokenizers.models.WordPiece`` (max_input_chars_per_word 100) give the same pieces for
    every word of the corpus, with the seed's vocabulary (few pieces: many [UNK]) and with HF's (every character)."""
    if vocabulary == "seed":
        vocab = _learnt(shared_data).vocab
    else:
        vocab = list(_hf_train(_subset(shared_data), "bpe").get_vocab())
    wordpiece = models.WordPiece({piece: i for i, piece in enumerate([UNK, *vocab])}, unk_token=UNK,
                                 max_input_chars_per_word=100)
    words = _words_to_tokenize(shared_data)
    known = set(vocab)
    ours = [tokenize_word(w, known) for w in words]
    theirs = [[token.value for token in wordpiece.tokenize(w)] for w in words]
    mismatches = [(w, a, b) for w, a, b in zip(words, ours, theirs) if a != b]
    assert mismatches == [], mismatches[:5]
    assert len(words) > 20000
    unk = sum(pieces == [UNK] for pieces in ours)
    split = sum(len(pieces) > 1 for pieces in ours)
    assert 0 < unk < len(words) and split > 1000, (unk, split)
    assert ours[-2] == ours[-1] == [UNK]  # over 100 characters
    if {"ㅋ", "##ㅋ"} <= known:
        assert ours[-3] == ["ㅋ"] + ["##ㅋ"] * 99

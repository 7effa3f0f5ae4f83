"""Tests of seqlab.tokenizer: text <-> ids for the four levels."""

from __future__ import annotations

import json
import random
import unicodedata

import pytest

from seqlab.sections import TokenizerConfig
from seqlab.specials import EOS, PAD, SOS, SPECIALS, UNK
from seqlab.text import normalize
from seqlab.tokenizer import Tokenizer, split_words

LEVELS = ["char", "word", "bpe", "wordpiece"]

ENGLISH = [
    "Two dogs, one ball!",
    "A man in an orange hat starring at something.",
    "Two young, White males are outside near many bushes.",
    "A little girl climbing into a wooden playhouse.",
    "The dog plays with the ball in the park.",
    "the cat sleeps on the mat; the dog doesn't.",
]
DATES = [  # the book's date.txt source formats, and its target format
    "thursday, november 13, 2008",
    "september 27, 1994",
    "TUESDAY, SEPTEMBER 25, 1984",
    "8/19/03",
    "Jun 17, 2013",
    "1994-09-27",
]
ADDITION = ["52+607", "16+75", "_91", "_659"]  # the book's addition.txt sources and targets
KOREAN = [  # ChatbotData-style
    "헤어진 사람이 자꾸 생각나.",
    "12시 땡!",
    "가스비 비싼데 감기 걸리겠어",
    "사랑이 뭐라고 생각해?",
]
SAMPLES = ENGLISH + DATES + ADDITION + KOREAN


def _generated_dates(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    days = "monday tuesday wednesday thursday friday saturday sunday".split()
    months = "january february march april may june july august september october november december".split()
    return [f"{rng.choice(days)}, {rng.choice(months)} {rng.randint(1, 28)}, {rng.randint(1970, 2030)}"
            for _ in range(n)]


CORPUS = SAMPLES * 3 + _generated_dates(300)


def train(level: str, texts=CORPUS, **kw) -> Tokenizer:
    kw.setdefault("vocab_size", 300)
    return Tokenizer.train(texts, TokenizerConfig(level=level, **kw))


@pytest.fixture(scope="module", params=LEVELS)
def tok(request) -> Tokenizer:
    return train(request.param)


def roundtrip(t: Tokenizer, text: str) -> str:
    return t.decode(t.encode([text]))[0]


def vocab(t: Tokenizer) -> list[str]:
    return t.tokens_from_ids(range(t.vocab_size))


# --- special ids ---------------------------------------------------------------


def test_special_constants():
    assert (PAD, SOS, EOS, UNK) == (0, 1, 2, 3)
    assert SPECIALS == ("<pad>", "<sos>", "<eos>", "<unk>")


def test_special_ids_in_every_vocabulary(tok):
    assert tok.tokens_from_ids([0, 1, 2, 3]) == list(SPECIALS)
    again = Tokenizer.from_json(tok.to_json())
    assert again.tokens_from_ids([0, 1, 2, 3]) == list(SPECIALS)
    assert len(set(vocab(tok))) == tok.vocab_size  # ids 0..vocab_size-1, each a distinct token


def test_encode_adds_no_specials_and_decode_drops_them(tok):
    [ids] = tok.encode(["Two dogs, one ball!"])
    assert not {PAD, SOS, EOS, UNK} & set(ids)
    assert tok.decode([[SOS, *ids, EOS, PAD, PAD]]) == ["Two dogs, one ball!"]
    assert tok.decode([[UNK, *ids, UNK]]) == ["Two dogs, one ball!"]


def test_special_token_text_is_ordinary_text():
    t = train("char", CORPUS + ["a <pad> <sos> <eos> <unk> b"])
    [ids] = t.encode(["<eos>"])
    assert len(ids) == 5 and not {PAD, SOS, EOS, UNK} & set(ids)
    assert roundtrip(t, "a <eos> <unk>") == "a <eos> <unk>"
    w = train("word", CORPUS + ["a <eos> b"])
    assert EOS not in w.encode(["the <eos> dog"])[0]


# --- round trips ------------------------------------------------------------------


@pytest.mark.parametrize("text", SAMPLES)
def test_round_trip_training_samples(tok, text):
    assert roundtrip(tok, text) == text


def test_round_trip_batch(tok):
    assert tok.decode(tok.encode(SAMPLES)) == SAMPLES


@pytest.mark.parametrize("level", ["char", "bpe", "wordpiece"])
def test_round_trip_unseen_text_of_seen_characters(level):
    t = train(level)
    unseen = ["sunday, march 3, 1999", "dogs sleep; cats play!", "607+52", "생각해 사람이?", "Two White cats."]
    for text in unseen:
        assert text not in CORPUS
        assert UNK not in t.encode([text])[0]
        assert roundtrip(t, text) == text


def test_round_trip_unseen_sentence_of_seen_words():
    t = train("word")
    text = "the ball plays with Two dogs, one cat!"
    assert UNK not in t.encode([text])[0]
    assert roundtrip(t, text) == text


@pytest.mark.parametrize("lowercase", [False, True])
@pytest.mark.parametrize("level", ["char", "bpe", "wordpiece"])
def test_round_trip_random_strings_of_seen_characters(level, lowercase):
    t = train(level, lowercase=lowercase, vocab_size=150)
    rng = random.Random(7)
    alphabet = sorted(set("".join(CORPUS))) + ["\t", "\n", "\u00a0", "  "]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(1000)]
    ids = t.encode(texts)
    assert not any(UNK in row for row in ids)
    assert t.decode(ids) == [normalize(x, lowercase) for x in texts]


def test_word_round_trip_random_sequences_of_seen_words():
    t = train("word")
    pieces = sorted({p for s in CORPUS for p in t.tokens(s)})
    rng = random.Random(7)
    checked = 0
    for _ in range(300):
        seq = [rng.choice(pieces) for _ in range(rng.randint(1, 12))]
        text = "".join(seq).replace("▁", " ").strip()
        if t.tokens(text) != seq:  # glued pieces read back as other words ("▁Two" + "607")
            continue
        assert roundtrip(t, text) == text
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("level", ["bpe", "wordpiece"])
def test_subword_round_trip_exercises_word_internal_pieces(level):
    assert len(set("".join(CORPUS))) + 4 < 120
    t = train(level, vocab_size=120)  # small: words are split into several pieces
    pieces = t.tokens("A little girl climbing into a wooden playhouse.")
    assert any(not p.startswith("▁") for p in pieces)  # there are word-internal pieces
    for text in SAMPLES:
        assert roundtrip(t, text) == text


def test_korean_nfd_input_is_nfc_normalised(tok):
    text = "헤어진 사람이 자꾸 생각나."
    nfd = unicodedata.normalize("NFD", text)
    assert nfd != text
    assert tok.encode([nfd]) == tok.encode([text])
    assert roundtrip(tok, nfd) == text


def test_training_on_nfd_text_gives_a_syllable_vocabulary():
    nfd = [unicodedata.normalize("NFD", s) for s in KOREAN]
    t = train("char", nfd)
    assert "헤" in vocab(t)
    assert not any(unicodedata.normalize("NFD", c) != c and len(c) > 1 for c in vocab(t)[4:])
    assert roundtrip(t, KOREAN[0]) == KOREAN[0]


def test_whitespace_is_collapsed_and_stripped(tok):
    messy = "  Two\tdogs,\n one   ball!\u00a0 "
    assert tok.normalize(messy) == "Two dogs, one ball!"
    assert roundtrip(tok, messy) == "Two dogs, one ball!"
    assert tok.encode([messy]) == tok.encode(["Two dogs, one ball!"])


def test_empty_text(tok):
    assert tok.encode(["", "   "]) == [[], []]
    assert tok.decode([[], [PAD, EOS]]) == ["", ""]


def test_decode_output_is_canonical():
    t = train("char")
    a, space, b = t.encode(["a b"])[0]
    assert t.decode([[space, a, space, space, b, space]]) == ["a b"]
    w = train("word")
    lone, two = w.encode(["Bonjour !"])[0][1], w.encode(["Two"])[0][0]
    assert w.tokens_from_ids([lone]) == ["▁"]
    assert w.decode([[lone, lone, two]]) == ["Two"]


# --- unknown symbols -------------------------------------------------------------


def test_unknown_characters_become_unk(tok):
    ids = tok.encode(["Two dogs ★ one ball", "☃", "Ω≈ç√∫"])
    assert all(UNK in row for row in ids)
    assert tok.decode(ids)[1] == ""


def test_char_unknown_is_exactly_the_unseen_character():
    t = train("char")
    a, b = t.encode(["a"])[0][0], t.encode(["b"])[0][0]
    assert t.encode(["a★b"]) == [[a, UNK, b]]
    assert t.decode([[a, UNK, b]]) == ["ab"]


def test_word_unknown_is_the_unseen_word():
    t = train("word")
    ids = t.encode(["the zebra plays"])[0]
    assert len(ids) == 3 and ids[1] == UNK and ids.count(UNK) == 1
    assert t.decode([ids]) == ["the plays"]


def test_bpe_unknown_is_per_character():
    t = train("bpe")
    ids = t.encode(["dogs★"])[0]
    assert ids[-1] == UNK and ids.count(UNK) == 1
    assert t.decode([ids]) == ["dogs"]


def test_wordpiece_unknown_is_the_whole_word():
    t = train("wordpiece")
    ids = t.encode(["the dogs★ play"])[0]
    assert UNK in ids
    assert t.decode([ids]) == ["the play"]


# --- lowercase -------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_lowercase(level):
    t = train(level, lowercase=True)
    for text in SAMPLES:
        assert roundtrip(t, text) == unicodedata.normalize("NFC", text.lower())
    assert t.encode(["TUESDAY, September"]) == t.encode(["tuesday, september"])
    assert not any(ch.isupper() for token in vocab(t)[4:] for ch in token)


def test_normalize_recomposes_after_lowercasing():
    assert normalize("J\u030c", lowercase=True) == "\u01f0"  # j + caron composes only in lowercase
    assert normalize("J\u030c") == "J\u030c"


# --- serialisation ---------------------------------------------------------------


def test_json_round_trip(tok):
    text = tok.to_json()
    data = json.loads(text)
    assert data["format"] == "seqlab.tokenizer" and data["config"]["level"] == tok.config.level
    again = Tokenizer.from_json(text)
    probe = SAMPLES + ["  messy\tTwo  dogs ", "Two dogs ★ one ball", "<eos>", "헤어진 사람이 ☃"]
    assert again.encode(probe) == tok.encode(probe)
    ids = tok.encode(probe)
    assert again.decode(ids) == tok.decode(ids)
    assert again.vocab_size == tok.vocab_size
    assert again.config == tok.config
    assert again.tokens("Two dogs, one ball!") == tok.tokens("Two dogs, one ball!")
    assert again.to_json() == text


def test_json_keeps_lowercase():
    t = Tokenizer.from_json(train("bpe", lowercase=True).to_json())
    assert roundtrip(t, "Two Dogs") == "two dogs"


@pytest.mark.parametrize("bad", ["", "{}", "[1, 2]", '{"format": "seqlab.tokenizer", "version": 99}',
                                 '{"format": "seqlab.tokenizer", "version": 1, "config": {"level": "x"}}',
                                 '{"format": "seqlab.tokenizer", "version": 1, "config": {}, "tokenizer": {}}'])
def test_from_json_rejects_what_is_not_a_tokenizer(bad):
    with pytest.raises(ValueError):
        Tokenizer.from_json(bad)


# --- vocabularies ----------------------------------------------------------------


@pytest.mark.parametrize("level", ["bpe", "wordpiece"])
def test_subword_vocab_size_is_respected(level):
    texts = ENGLISH * 5 + _generated_dates(500)
    for size in (60, 150):
        assert train(level, texts, vocab_size=size).vocab_size == size


@pytest.mark.parametrize("level", ["bpe", "wordpiece"])
def test_subword_vocab_size_bounds_a_large_alphabet(level):
    syllables = [chr(0xAC00 + i) for i in range(0, 11172, 37)]  # 302 distinct Hangul syllables
    texts = ["".join(syllables[i:i + 7]) + " " + "".join(syllables[i + 7:i + 12]) for i in range(0, 290, 3)]
    t = train(level, texts, vocab_size=100)
    assert t.vocab_size <= 100
    assert t.tokens_from_ids([0, 1, 2, 3]) == list(SPECIALS)


@pytest.mark.parametrize("level", ["bpe", "wordpiece"])
def test_frequent_words_become_single_tokens(level):
    t = train(level, vocab_size=300)
    assert t.tokens("the dog") == ["▁the", "▁dog"]
    assert t.tokens("thursday, november 13, 2008")[:3] == ["▁thursday", ",", "▁november"]
    assert t.tokens("thursday november") == ["▁thursday", "▁november"]  # never seen without a comma
    assert len(t.tokens("Two young, White males are outside near many bushes.")) > 3


@pytest.mark.parametrize("level", ["bpe", "wordpiece"])
def test_min_frequency_limits_merges(level):
    texts = ["abcd efgh"] * 3 + ["ijkl mnop"]
    loose, strict = train(level, texts, min_frequency=1), train(level, texts, min_frequency=2)
    assert "▁ijkl" in vocab(loose) and "▁ijkl" not in vocab(strict)
    assert "▁abcd" in vocab(strict)
    assert roundtrip(strict, "ijkl abcd") == "ijkl abcd"


def test_char_vocabulary_is_the_characters_seen():
    t = train("char")
    seen = set("".join(normalize(s) for s in CORPUS))
    assert " " in seen
    assert set(vocab(t)[4:]) == seen
    assert t.vocab_size == len(seen) + 4


def test_char_vocab_size_keeps_the_most_frequent_characters():
    t = train("char", ["aaaa bbbbb cc d"], vocab_size=7)
    assert vocab(t) == list(SPECIALS) + ["b", "a", " "]
    assert t.encode(["cab"]) == [[UNK, 5, 4]]


def test_char_min_frequency():
    t = train("char", ["aaaa bbbbb cc d"], min_frequency=2)
    assert set(vocab(t)[4:]) == {"a", "b", "c", " "}


def test_char_tokens_keep_spaces():
    t = train("char")
    assert t.tokens("13, 2008") == ["1", "3", ",", " ", "2", "0", "0", "8"]


def test_word_level_splits_punctuation():
    t = train("word")
    assert t.tokens("Two dogs, one ball!") == ["▁Two", "▁dogs", ",", "▁one", "▁ball", "!"]
    assert t.tokens("52+607") == ["▁52", "+", "607"]
    assert t.tokens("헤어진 사람이 자꾸 생각나.") == ["▁헤어진", "▁사람이", "▁자꾸", "▁생각나", "."]


def test_word_level_keeps_a_space_before_punctuation_never_seen():
    t = train("word")
    assert not any(" !" in s or " ," in s for s in CORPUS)
    assert "▁" in vocab(t)
    assert roundtrip(t, "Two dogs , one ball !") == "Two dogs , one ball !"


def test_word_vocab_size_is_an_upper_bound():
    t = train("word", vocab_size=8)
    assert t.vocab_size == 8
    assert "▁" in vocab(t)
    full = train("word")
    assert 8 < full.vocab_size <= 300


def test_word_min_frequency():
    t = train("word", ["the dog", "the cat", "the dog"], min_frequency=2)
    assert set(vocab(t)[4:]) == {"▁the", "▁dog", "▁"}


# --- robustness ------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_training_is_deterministic(level):
    # Every HashMap tokenizers creates gets fresh random keys, in one process as in
    # another; a vocabulary must not depend on them. (It does for a WordPieceTrainer with
    # the usual "##" prefix -- five trainings, five vocabularies -- hence seqlab uses none.)
    texts = CORPUS + ENGLISH * 20
    runs = {train(level, texts, vocab_size=150).to_json() for _ in range(4)}
    assert len(runs) == 1


def test_batch_arguments_are_checked(tok):
    with pytest.raises(TypeError):
        tok.encode("Two dogs")  # one string, not a batch
    with pytest.raises(TypeError):
        tok.decode([4, 5, 6])  # one sequence, not a batch
    with pytest.raises(ValueError):
        tok.decode([[tok.vocab_size]])
    with pytest.raises(ValueError):
        tok.decode([[-1]])


def test_decode_accepts_arrays(tok):
    np = pytest.importorskip("numpy")
    ids = tok.encode(["52+607", "16+75"])
    width = max(map(len, ids))
    padded = np.array([row + [PAD] * (width - len(row)) for row in ids])
    assert tok.decode(padded) == ["52+607", "16+75"]


def test_training_input_is_checked():
    with pytest.raises(ValueError):
        train("bpe", [])
    with pytest.raises(TypeError):
        train("char", ["ok", None])


@pytest.mark.parametrize("level", ["char", "bpe", "wordpiece"])
def test_unknown_characters_are_the_ones_that_encode_to_unk(level):
    t = train(level)
    assert t.unknown_characters("사랑이 뭐라고 생각해?") == []
    assert t.unknown_characters("사랑 🍕 뭐라고？ 🍕") == ["🍕", "？"]  # distinct, in order; spaces never count
    assert UNK in t.encode(["🍕"])[0] and UNK not in t.encode(["사랑"])[0]


def test_word_level_reports_no_unknown_characters():
    assert train("word").unknown_characters("완전히 새로운 단어 🍕") == []


# --- Korean morpheme boundaries (tokens.*.morphemes, seqlab.morphemes) ------------------------------

def test_morpheme_boundaries_cut_inside_words_only():
    pytest.importorskip("kiwipiepy", reason="tokens.morphemes needs kiwipiepy (pip install 'seqlab[korean]')")
    from seqlab.morphemes import MARK, mark_boundaries

    marked = mark_boundaries(["학교에 갔었어요", "12시 땡!", "사랑이 뭐라고 생각해?", f"a{MARK}b"])
    # 갔었어요 is 가 + 었었 + 어요 to Kiwi; 가 and 었었 share the syllable 갔, so only 어요 is cut off
    assert marked[:3] == [f"학교{MARK}에 갔었{MARK}어요", f"12{MARK}시 땡!", f"사랑{MARK}이 뭐{MARK}라고 생각{MARK}해?"]
    assert marked[3] == "ab"  # a mark in the input is dropped, never trusted
    assert [m.replace(MARK, "") for m in marked[:3]] == ["학교에 갔었어요", "12시 땡!", "사랑이 뭐라고 생각해?"]


@pytest.mark.parametrize("level", ["word", "bpe", "wordpiece"])
def test_morpheme_tokenizer_round_trips_and_saves(level):
    pytest.importorskip("kiwipiepy", reason="tokens.morphemes needs kiwipiepy (pip install 'seqlab[korean]')")
    tok = train(level, KOREAN * 3 + ["학교에 갔었어요"] * 3, morphemes=True)
    if level == "word":
        assert tok.tokens("학교에 갔었어요") == ["▁학교", "에", "▁갔었", "어요"]
    for text in KOREAN + ["학교에 갔었어요"]:
        assert tok.decode(tok.encode([text])) == [text]
    again = Tokenizer.from_json(tok.to_json())
    assert again.config.morphemes and again.encode(KOREAN) == tok.encode(KOREAN)


def test_morphemes_without_kiwipiepy_is_a_clear_error(monkeypatch):
    from seqlab import morphemes

    morphemes._kiwi.cache_clear()
    monkeypatch.setitem(__import__("sys").modules, "kiwipiepy", None)  # import fails as if not installed
    with pytest.raises(RuntimeError, match=r"pip install 'seqlab\[korean\]'"):
        train("bpe", KOREAN, morphemes=True)
    morphemes._kiwi.cache_clear()


def test_morphemes_refused_at_the_char_level():
    with pytest.raises(ValueError, match="does not apply to level 'char'"):
        TokenizerConfig(level="char", morphemes=True)


@pytest.fixture(scope="module")
def kiwi_answers() -> dict[tuple[str, ...], list[str]]:
    """mark_boundaries's answers to the texts it was given in this module's ChatbotData round trips."""
    return {}


@pytest.mark.parametrize("morphemes", [False, True])
@pytest.mark.parametrize("level", ["bpe", "wordpiece"])
def test_chatbotdata_round_trips(shared_data, level, morphemes, kiwi_answers, monkeypatch):
    """Every question and answer of the real ChatbotData comes back exactly from a vocabulary learned on it. Kiwi
    marks the 23,646 texts once, not four times (training and encoding at each level give it the same texts, and
    its answer is the same; seconds each time)."""
    if morphemes:
        pytest.importorskip("kiwipiepy", reason="tokens.morphemes needs kiwipiepy (pip install 'seqlab[korean]')")
        from seqlab import tokenizer

        real = tokenizer.mark_boundaries

        def remembered(texts: list[str]) -> list[str]:
            key = tuple(texts)
            if key not in kiwi_answers:
                kiwi_answers[key] = real(texts)
            return list(kiwi_answers[key])

        monkeypatch.setattr(tokenizer, "mark_boundaries", remembered)
    from seqlab.corpora import CsvCorpus
    from seqlab.data import read_corpus

    spec = CsvCorpus(format="csv", path="chatbot_ko/ChatbotData.csv", source_column="Q", target_column="A")
    texts = [text for pair in read_corpus(spec, shared_data) for text in pair]
    tok = train(level, texts, vocab_size=8000, morphemes=morphemes)
    assert tok.decode(tok.encode(texts)) == [normalize(t) for t in texts]


def test_split_words_gives_the_word_levels_pieces_without_their_marks():
    assert split_words(["Two  dogs, one ball!", "Bonjour !"]) == [["Two", "dogs", ",", "one", "ball", "!"], ["Bonjour", "!"]]
    assert split_words(["The CAT"], lowercase=True) == [["the", "cat"]]
    pieces = Tokenizer.train(["Two dogs, one ball!"], TokenizerConfig(level="word")).tokens("Two dogs, one ball!")
    assert [p.removeprefix("\u2581") for p in pieces] == split_words(["Two dogs, one ball!"])[0]


def test_split_words_cuts_korean_morphemes():
    pytest.importorskip("kiwipiepy")
    assert split_words(["학교에 갔었어요"], morphemes=True) == [["학교", "에", "갔었", "어요"]]


def test_words_cut_at_spaces_only_keep_ptbs_unk_whole():
    cfg = TokenizerConfig(level="word", punctuation=False)
    tok = Tokenizer.train(["the <unk> rose N points", "a <unk> fell"], cfg)
    assert tok.tokens("the <unk> rose") == ["▁the", "▁<unk>", "▁rose"]
    assert tok.decode(tok.encode(["a <unk> rose N points"])) == ["a <unk> rose N points"]
    again = Tokenizer.from_json(tok.to_json())
    assert again.encode(["the <unk> fell"]) == tok.encode(["the <unk> fell"])
    assert Tokenizer.train(["the <unk>"], TokenizerConfig(level="word")).tokens("the <unk>")[-3:] == ["<", "unk", ">"]


def test_a_sample_is_drawn_uniformly_in_one_pass_and_the_vocabulary_is_learnt_from_it():
    from collections import Counter

    from seqlab.tokenizer import sample

    assert sample(map(str, range(10)), 20) == [str(i) for i in range(10)]  # fewer texts than the sample: all
    drawn = sample((str(i) for i in range(25_000)), 100, seed=3)  # a generator, read once, over several blocks
    assert len(drawn) == 100 == len(set(drawn)) and drawn == sorted(drawn, key=int)  # in the order they came
    assert drawn == sample(map(str, range(25_000)), 100, seed=3) != sample(map(str, range(25_000)), 100, seed=4)
    assert sum(int(t) >= 10_000 for t in drawn) > 40  # the later blocks are drawn from too (60 expected)
    counts = Counter(t for seed in range(600) for t in sample(map(str, range(30)), 5, seed))
    chi2 = sum((counts[str(i)] - 100) ** 2 / 100 for i in range(30))  # 600 × 5 / 30 = 100 expected each
    assert len(counts) == 30 and chi2 < 58.3  # 29 degrees of freedom: p = 0.001
    texts = [f"{w} {v}" for w in ("the cat", "a dog", "one bird") for v in ("sat", "ran", "flew", "sang")] * 50
    config = TokenizerConfig(level="bpe", vocab_size=60)
    sampled = Tokenizer.train(texts, config.model_copy(update={"sample": 30}))
    assert sampled._tok.to_str() == Tokenizer.train(sample(texts, 30), config)._tok.to_str()
    assert sampled._tok.to_str() != Tokenizer.train(texts, config)._tok.to_str()

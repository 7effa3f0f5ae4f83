"""How text becomes token ids and back: the one path used everywhere.

Training, evaluation, file translation, interactive use and the Python API all go through :class:`Tokenizer`, a thin
wrapper around a Hugging Face ``tokenizers.Tokenizer`` whose pipeline depends on ``TokenizerConfig.level``.

Every level shares the same normalisation (``seqlab.text.normalize``: NFC, lowercase where asked, whitespace
folded), so every level sees the same text.

:meth:`Tokenizer.normalize` returns that canonical form, and the contract is ``decode(encode([x]))[0] ==
normalize(x)`` for every text ``x`` the tokenizer covers (see below). So multiple consecutive spaces are collapsed
to one, at every level, by design: the four levels agree on what a text is, and a prediction can be compared with
``normalize(reference)``.

Per level (pre-tokeniser -> model -> decoder):

``char``
    Every code point (after NFC) is a token, the space included (as ``" "``).
    The vocabulary (the most frequent characters) is counted by
    ``WordLevelTrainer`` over a ``Split(Regex("."))`` pre-tokenisation; the
    encoder is then a ``BPE`` model with that vocabulary and *no merges* and
    no pre-tokeniser, which splits a text into characters ~2x faster than
    one split per character -> ``Fuse`` decoder (concatenate). Covers any
    text whose characters were all kept in the vocabulary.
``word``, ``bpe``, ``wordpiece`` share one pre-tokeniser: SentencePiece-style
    ``Metaspace`` (a space becomes ``"▁"`` glued to the word after it), then
    ``Punctuation`` (every punctuation mark -- Unicode P* and ASCII symbols
    such as ``+ $ < = >`` -- is a piece of its own), so
    ``"Two dogs, one ball!"`` -> ``▁Two ▁dogs , ▁one ▁ball !`` and
    ``"52+607"`` -> ``▁52 + 607``. The decoder is the matching ``Metaspace``
    decoder (``"▁"`` -> space, the first one dropped).
``word``
    ``WordLevel`` over the most frequent pieces. The lone ``"▁"`` (a space
    before punctuation, as in ``"Bonjour !"``) is always in the vocabulary,
    so a space is never lost. Covers any text whose words and punctuation
    marks were all kept.
``bpe``
    ``BPE`` learned by ``BpeTrainer``. Splitting punctuation first (unlike
    plain SentencePiece) keeps ``thursday`` one token although the training
    dates always say ``thursday,``, and spends no vocabulary on
    ``▁13,``-style variants.
``wordpiece``
    ``WordPiece`` learned by ``WordPieceTrainer`` with an *empty*
    continuing-subword prefix. The ``"▁"`` already marks where a word starts,
    so the usual ``##`` prefix carries no information; it would also make
    training non-deterministic (tokenizers 0.23 numbers the ``##`` alphabet
    in hash order, so two processes learn different vocabularies from the
    same data) and would double the alphabet. Note that tokenizers'
    ``WordPieceTrainer`` is BPE training; what differs from ``bpe`` is the
    encoder (greedy longest match instead of merges) and the handling of
    unseen characters (below).

With ``morphemes`` (Korean; ``word``/``bpe``/``wordpiece``), words are also cut at the morpheme boundaries that
kiwipiepy finds, before the model sees them: :mod:`seqlab.morphemes` marks the cuts in the text and a last ``Split``
pre-tokeniser cuts there, so ``"학교에 갔었어요"`` -> ``▁학교 에 ▁갔었 어요`` at the ``word`` level. The decoder is unchanged.

For ``bpe``/``wordpiece`` a text is covered when all its characters were in the training texts (the whole alphabet
is kept unless it alone exceeds ``vocab_size``).

What does not round-trip (by design or by limitation):

* whitespace, as said: runs collapse to one space, ends are stripped, and any
  whitespace character becomes ``" "``;
* with ``lowercase``, the result is the lowercased text;
* the character ``"▁"`` (U+2581) itself, in ``word``/``bpe``/``wordpiece``:
  it decodes as a space (``char`` keeps it);
* anything unseen: it is encoded as ``<unk>`` (id 3) and ``decode`` drops
  special ids, so it disappears. ``char``/``bpe``: one ``<unk>`` per unseen
  character; ``word``: per unseen word or mark; ``wordpiece``: the whole
  word (up to the next space or punctuation mark) becomes one ``<unk>``
  (that is how WordPiece works).

Special tokens ``<pad> <sos> <eos> <unk>`` have ids 0..3 in every vocabulary. Their *text* is never special:
``"<eos>"`` typed in the input is encoded as ordinary characters, so data can never inject an end of sequence.
``encode`` adds no special ids; ``decode`` drops them (it does not cut at the first ``<eos>``: callers that decode
raw model output cut there first).

Serialisation is JSON only (no pickle): ``to_json`` holds the ``TokenizerConfig`` (whose ``lowercase`` drives the
normalisation) and the ``tokenizers`` pipeline, ``from_json`` rebuilds it exactly."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from tokenizers import Regex, decoders, models, pre_tokenizers, trainers
from tokenizers import Tokenizer as _HFTokenizer

from seqlab.morphemes import MARK, mark_boundaries
from seqlab.sections import TokenizerConfig, TokensConfig
from seqlab.specials import MASK, MASK_TOKEN, SPECIALS, UNK
from seqlab.text import Span, normalize, normalize_with_offsets

__all__ = ["Tokenizer", "learn_tokenizers", "split_words"]

_SPACE = "▁"  # U+2581, SentencePiece's meta-space
_FORMAT = "seqlab.tokenizer"
_FORMAT_VERSION = 1
_MAX_WORD_CHARS = 1000  # WordPiece: a longer word (between spaces/punctuation) becomes <unk>; default 100


def _words(morphemes: bool, punctuation: bool = True) -> pre_tokenizers.PreTokenizer:
    """SentencePiece-style ``▁word`` pieces, each punctuation mark a piece of its own (unless not
    ``punctuation``); with ``morphemes`` the words are also cut where :func:`seqlab.morphemes.mark_boundaries`
    put its mark."""
    steps: list[pre_tokenizers.PreTokenizer] = [pre_tokenizers.Metaspace(replacement=_SPACE)]
    if punctuation:
        steps.append(pre_tokenizers.Punctuation("isolated"))
    if morphemes:
        steps.append(pre_tokenizers.Split(MARK, "removed"))
    return pre_tokenizers.Sequence(steps)


def split_words(texts: Sequence[str], lowercase: bool = False, morphemes: bool = False) -> list[list[str]]:
    """Each text as the words the ``word`` level sees, without their ``▁``: ``"Two dogs, one ball!"`` ->
    ``["Two", "dogs", ",", "one", "ball", "!"]``; with ``morphemes``, cut into morphemes (word vectors' input)."""
    batch = [normalize(t, lowercase) for t in texts]
    if morphemes:
        batch = mark_boundaries(batch)
    pre = _words(morphemes)
    return [[piece.removeprefix(_SPACE) for piece, _ in pre.pre_tokenize_str(text) if piece != _SPACE] for text in batch]


def _pipeline(cfg: TokenizerConfig, specials: list[str]) -> tuple[_HFTokenizer, trainers.Trainer]:
    """An untrained ``tokenizers`` pipeline for ``cfg.level`` and the trainer that fills it."""
    unk = SPECIALS[UNK]
    trainer: trainers.Trainer
    if cfg.level in ("char", "word"):
        tok = _HFTokenizer(models.WordLevel(unk_token=unk))
        trainer = trainers.WordLevelTrainer(
            vocab_size=cfg.vocab_size, min_frequency=cfg.min_frequency,
            special_tokens=specials, show_progress=False)
    elif cfg.level == "bpe":
        tok = _HFTokenizer(models.BPE(unk_token=unk))
        trainer = trainers.BpeTrainer(
            vocab_size=cfg.vocab_size, min_frequency=cfg.min_frequency, special_tokens=specials,
            limit_alphabet=cfg.vocab_size - len(specials), show_progress=False)
    elif cfg.level == "wordpiece":
        tok = _HFTokenizer(models.WordPiece(
            unk_token=unk, continuing_subword_prefix="", max_input_chars_per_word=_MAX_WORD_CHARS))
        trainer = trainers.WordPieceTrainer(
            vocab_size=cfg.vocab_size, min_frequency=cfg.min_frequency, special_tokens=specials,
            limit_alphabet=cfg.vocab_size - len(specials), continuing_subword_prefix="",
            show_progress=False)
    else:  # pragma: no cover - TokenizerConfig.level is a Literal
        raise ValueError(f"unknown tokenizer level {cfg.level!r}")
    if cfg.level == "char":  # the pre-tokeniser only counts characters; see _char_encoder
        tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), "isolated")
    else:
        tok.pre_tokenizer = _words(cfg.morphemes, cfg.punctuation)
        tok.decoder = decoders.Metaspace(replacement=_SPACE)
    return tok, trainer


def _char_encoder(vocab: dict[str, int], specials: list[str]) -> _HFTokenizer:
    """Characters -> ids: a merge-less BPE over the whole text splits it into code points."""
    tok = _HFTokenizer(models.BPE(vocab=vocab, merges=[], unk_token=SPECIALS[UNK]))
    tok.add_special_tokens(specials)  # already the first ids in vocab: marks them special
    tok.decoder = decoders.Fuse()
    return tok


def _ensure_word_space(tok: _HFTokenizer, vocab_size: int, specials: list[str]) -> None:
    """Put the lone ``"▁"`` into a word-level vocabulary (replacing the rarest word if full)."""
    vocab = tok.get_vocab(with_added_tokens=False)
    if _SPACE in vocab:
        return
    by_id = sorted(vocab, key=vocab.__getitem__)  # WordLevelTrainer numbers words by falling frequency
    if len(by_id) >= vocab_size and len(by_id) > len(specials):
        by_id.pop()
    by_id.append(_SPACE)
    tok.model = models.WordLevel(vocab={w: i for i, w in enumerate(by_id)}, unk_token=SPECIALS[UNK])


def _check(tok: _HFTokenizer) -> None:
    for i, s in enumerate(SPECIALS):
        if tok.token_to_id(s) != i:
            raise ValueError(f"tokenizer vocabulary has {s!r} at id {tok.token_to_id(s)}, expected {i}")
    if tok.token_to_id(MASK_TOKEN) not in (None, MASK):
        raise ValueError(f"tokenizer vocabulary has {MASK_TOKEN!r} at id {tok.token_to_id(MASK_TOKEN)}, expected {MASK}")
    n = tok.get_vocab_size(with_added_tokens=True)
    if sorted(tok.get_vocab(with_added_tokens=True).values()) != list(range(n)):
        raise ValueError("tokenizer ids are not contiguous 0..vocab_size-1")
    if tok.normalizer is not None:
        raise ValueError("tokenizer pipeline has a normaliser; seqlab normalises in Python")


def _prepare(texts: Sequence[str], cfg: TokenizerConfig) -> list[str]:
    """What the ``tokenizers`` pipeline is given: each text normalised and, with ``cfg.morphemes``, marked."""
    batch = [normalize(t, cfg.lowercase) for t in texts]
    return mark_boundaries(batch) if cfg.morphemes else batch


TRAIN_BATCH = 10_000  # texts normalised and handed to the trainer at a time: a corpus is never held whole


def sample(texts: Iterable[str], size: int, seed: int = 0) -> list[str]:
    """``size`` of ``texts`` drawn uniformly at random in one pass (reservoir sampling, Vitter's Algorithm R: text i
    takes the place of a random kept one with probability size / (i + 1)), in the order they came; all of them if
    there are no more."""
    rng = np.random.default_rng(seed)
    given = iter(texts)
    kept = list(enumerate(itertools.islice(given, size)))  # (index, text)
    first = len(kept)  # the index of the next block's first text
    while block := list(itertools.islice(given, TRAIN_BATCH)):
        slots = rng.integers(0, np.arange(first + 1, first + len(block) + 1))  # text i's slot: one of 0..i
        for k in np.flatnonzero(slots < size):
            kept[slots[k]] = (first + int(k), block[k])
        first += len(block)
    return [text for _, text in sorted(kept)]


def _prepared_batches(texts: Iterable[str], cfg: TokenizerConfig, seen: list[int]) -> Iterator[list[str]]:
    """``texts`` as the trainer takes them (``_prepare``), a batch at a time; ``seen[0]`` counts them. The same
    vocabulary as one list of them (the trainer counts words, whatever the batches)."""
    batch: list[str] = []
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"training texts must be str, got {type(text).__name__} at index {seen[0]}")
        batch.append(text)
        seen[0] += 1
        if len(batch) == TRAIN_BATCH:
            yield _prepare(batch, cfg)
            batch = []
    if batch:
        yield _prepare(batch, cfg)


def _as_rows(ids: Any) -> list[list[int]]:
    if hasattr(ids, "tolist"):  # a torch tensor / numpy array
        ids = ids.tolist()
    rows = []
    for row in ids:
        if hasattr(row, "tolist"):
            row = row.tolist()
        if isinstance(row, int):
            raise TypeError("decode takes a batch of id sequences, e.g. decode([ids]), not one sequence")
        rows.append(row if isinstance(row, list) else list(row))
    return rows


class Tokenizer:
    """Text <-> token ids for one side of a seq2seq task. Build with :meth:`train` or :meth:`from_json`."""

    def __init__(self, tok: _HFTokenizer, cfg: TokenizerConfig) -> None:
        _check(tok)
        # The text "<eos>" is ordinary text: special ids come only from code, never from data.
        tok.encode_special_tokens = True
        self._tok = tok
        self._cfg = cfg
        self._lower = cfg.lowercase
        self._size = tok.get_vocab_size(with_added_tokens=True)
        # encode_batch_fast (tokenizers >= 0.20) skips offset tracking, which seqlab never reads.
        self._encode_batch = getattr(tok, "encode_batch_fast", tok.encode_batch)

    # --- building -------------------------------------------------------------

    @classmethod
    def train(cls, texts: Iterable[str], cfg: TokenizerConfig, mask: bool = False) -> Tokenizer:
        """Learn a vocabulary of at most ``cfg.vocab_size`` ids (specials included) from ``texts``; with ``mask``,
        a masked language model's, ``<mask>`` at id 4.

        ``min_frequency``: for ``char``/``word``, symbols seen fewer times are left out
        (they become ``<unk>``); for ``bpe``/``wordpiece``, a pair must be seen that often
        to be merged. ``sample``: learnt from that many of the texts (``sample``). Deterministic: the same texts
        and config give the same vocabulary.
        """
        specials = [*SPECIALS, MASK_TOKEN] if mask else list(SPECIALS)
        tok, trainer = _pipeline(cfg, specials)
        seen = [0]
        tok.train_from_iterator(_prepared_batches(texts if cfg.sample is None else sample(texts, cfg.sample), cfg, seen),
                                trainer)
        if not seen[0]:
            raise ValueError("cannot train a tokenizer on no text")
        if cfg.level == "char":
            tok = _char_encoder(tok.get_vocab(with_added_tokens=False), specials)
        elif cfg.level == "word":
            _ensure_word_space(tok, cfg.vocab_size, specials)
        return cls(tok, cfg)

    def with_space(self) -> Tokenizer:
        """This character tokenizer with the space in its vocabulary (appended, the other ids unchanged): it pads
        the book's fixed-width questions and answers as in the book's files, also where no text has a space."""
        if self._cfg.level != "char":
            raise ValueError("only a character vocabulary takes the space as a token (tokens level char)")
        vocab = self._tok.get_vocab(with_added_tokens=False)
        if " " in vocab:
            return self
        specials = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])[: len(SPECIALS)]]
        return Tokenizer(_char_encoder(vocab | {" ": len(vocab)}, specials), self._cfg)

    # --- text <-> ids ---------------------------------------------------------

    def normalize(self, text: str) -> str:
        """The canonical form of ``text``, which ``decode(encode([text]))`` gives back if covered."""
        return normalize(text, self._lower)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text (a batch); no special ids are added. Unseen symbols -> ``UNK``."""
        if isinstance(texts, str):
            raise TypeError("encode takes a batch of texts, e.g. encode([text]), not one string")
        return [enc.ids for enc in self._encode_batch(_prepare(texts, self._cfg), add_special_tokens=False)]

    def encode_offsets(self, texts: Sequence[str]) -> list[tuple[list[int], list[Span]]]:
        """Token ids of each text, and each token's span of the text as given (before normalisation): ``text[s:e]``
        is the token's text, without the space its ``"▁"`` stands for (seed 002 §10.1's offset mapping, S103).
        Not for ``morphemes`` tokenizers, whose cuts are marks put into the text."""
        if isinstance(texts, str):
            raise TypeError("encode_offsets takes a batch of texts, e.g. encode_offsets([text]), not one string")
        if self._cfg.morphemes:
            raise ValueError("token offsets need a tokenizer without morphemes (tokens.source.morphemes false)")
        normal = [normalize_with_offsets(text, self._lower) for text in texts]
        out = []
        for text, (form, spans), enc in zip(texts, normal, self._tok.encode_batch([f for f, _ in normal],
                                                                               add_special_tokens=False)):
            offsets = []
            for token, (s, e) in zip(enc.tokens, enc.offsets):
                if token.startswith(_SPACE) and s < e and form[s] == " ":
                    s += 1  # the space the "▁" stands for is not the token's
                at = spans[s][0] if s < len(spans) else len(text)
                offsets.append((at, spans[e - 1][1]) if e > s else (at, at))
            out.append((enc.ids, offsets))
        return out

    def decode(self, ids: Sequence[Sequence[int]]) -> list[str]:
        """Text of each id sequence (a batch, lists or a 2-D tensor), special ids dropped.

        The result is in :meth:`normalize`'d form: for decoded covered text that changes
        nothing; for raw model output it collapses e.g. two spaces in a row.
        """
        rows = _as_rows(ids)
        size = self._size
        for row in rows:
            if row and (min(row) < 0 or max(row) >= size):
                bad = next(i for i in row if not 0 <= i < size)
                raise ValueError(f"token id {bad} is outside this vocabulary (size {size})")
        lower = self._lower
        return [normalize(s, lower) for s in self._tok.decode_batch(rows, skip_special_tokens=True)]

    def unknown_characters(self, text: str) -> list[str]:
        """The distinct characters of ``text`` (normalised) that this tokenizer encodes as ``<unk>``, in order.

        A character is unknown when it alone encodes to ``<unk>`` (for ``wordpiece`` too, where an unseen
        character makes its whole word one ``<unk>``). At the ``word`` level words, not characters, are
        known or not, so nothing is reported there.
        """
        if self._cfg.level == "word":
            return []
        chars = list(dict.fromkeys(c for c in self.normalize(text) if not c.isspace()))
        return [c for c, ids in zip(chars, self.encode(chars)) if UNK in ids]

    def tokens(self, text: str) -> list[str]:
        """The token strings of ``text`` (for display and attention plots); ``"▁"`` marks a space."""
        if not isinstance(text, str):
            raise TypeError(f"tokens takes one string, got {type(text).__name__}")
        return self._tok.encode(_prepare([text], self._cfg)[0], add_special_tokens=False).tokens

    def token_id(self, token: str) -> int:
        """The id of one token string, e.g. ``" "`` at the char level; a ValueError names a token not in the vocabulary."""
        found = self._tok.token_to_id(token)
        if found is None:
            raise ValueError(f"{token!r} is not in the vocabulary")
        return found

    def tokens_from_ids(self, ids: Sequence[int]) -> list[str]:
        """The token strings of one id sequence (e.g. model output), specials included."""
        out = []
        for i in _as_rows([ids])[0]:
            token = self._tok.id_to_token(i) if i >= 0 else None
            if token is None:
                raise ValueError(f"token id {i} is outside this vocabulary (size {self._size})")
            out.append(token)
        return out

    # --- facts ----------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of ids, specials included; ids are ``0 .. vocab_size - 1``."""
        return self._size

    @property
    def has_mask(self) -> bool:
        """A masked language model's vocabulary: ``<mask>`` at id 4 (``Tokenizer.train(..., mask=True)``)."""
        return self._tok.token_to_id(MASK_TOKEN) == MASK

    @property
    def first_ordinary_id(self) -> int:
        """The lowest id that is not a special token."""
        return MASK + 1 if self.has_mask else len(SPECIALS)

    @property
    def config(self) -> TokenizerConfig:
        return self._cfg

    def __repr__(self) -> str:
        c = self._cfg
        return f"Tokenizer(level={c.level!r}, vocab_size={self._size}, lowercase={c.lowercase})"

    # --- serialisation --------------------------------------------------------

    def to_json(self) -> str:
        """Everything needed to rebuild this tokenizer, as JSON text (UTF-8, not ASCII-escaped).

        ``{"format": "seqlab.tokenizer", "version": 1, "config": TokenizerConfig,
        "tokenizer": <the tokenizers pipeline, as tokenizers.Tokenizer.to_str() writes it>}``.
        The normalisation is not in the pipeline: it is :func:`normalize` with ``config.lowercase``.
        """
        return json.dumps({
            "format": _FORMAT,
            "version": _FORMAT_VERSION,
            "config": self._cfg.model_dump(mode="json"),
            "tokenizer": json.loads(self._tok.to_str()),
        }, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Tokenizer:
        """Rebuild a tokenizer saved by :meth:`to_json`; ``ValueError`` if ``text`` is not one."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a seqlab tokenizer: invalid JSON ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError('not a seqlab tokenizer: missing "format": "seqlab.tokenizer"')
        if data.get("version") != _FORMAT_VERSION:
            raise ValueError(f"seqlab tokenizer format version {data.get('version')!r} is not supported "
                             f"(this seqlab reads version {_FORMAT_VERSION})")
        try:
            cfg = TokenizerConfig.model_validate(data["config"])
            tok = _HFTokenizer.from_str(json.dumps(data["tokenizer"]))
        except Exception as exc:  # pydantic ValidationError, KeyError, tokenizers' Exception
            raise ValueError(f"corrupt seqlab tokenizer: {exc}") from None
        return cls(tok, cfg)


def learn_tokenizers(train_pairs: Iterable[tuple[str, str]], cfg: TokensConfig,
                     spaces: tuple[bool, bool] = (False, False)) -> tuple[Tokenizer, Tokenizer]:
    """The source and target tokenizers learnt from the training pairs (one shared one if ``cfg.shared``).
    ``spaces``: whether the source's and the target's vocabulary must hold the space character, which pads the
    book's fixed-width questions and answers (``data.source_width``, ``data.target_width``) as it does in the
    book's files (``Tokenizer.with_space``). The pairs are iterated once per side (a list, or a corpus read from
    its files each time: ``data.corpus.CorpusStream``)."""
    sources, targets = (s for s, _ in train_pairs), (t for _, t in train_pairs)
    if cfg.shared:
        shared = _with_space(itertools.chain(sources, targets), cfg.source, any(spaces))
        return shared, shared
    return _with_space(sources, cfg.source, spaces[0]), _with_space(targets, cfg.target, spaces[1])


def _with_space(texts: Iterable[str], cfg: TokenizerConfig, space: bool) -> Tokenizer:
    tokenizer = Tokenizer.train(texts, cfg)
    return tokenizer.with_space() if space else tokenizer

"""A Kneser-Ney n-gram model beside a language model's network, their next-word probabilities interpolated.

    stream ─┬─ network ─ softmax ───────────────────────────── p_net ───┬─ w·p_net + (1-w)·p_kn
            └─ the last n-1 words of the sentence ─ Kneser-Ney ─ p_kn ───┘

Interpolated modified Kneser-Ney (Chen & Goodman 1998, as KenLM's ``lmplz`` estimates it): for an n-gram ``h w``
of order k, with adjusted counts ``a`` (the raw count at the highest order and for n-grams that open a sentence,
elsewhere the number of different words seen before it), three discounts per order from the counts of counts
``t_j`` (``Y = t_1 / (t_1 + 2 t_2)``, ``D_j = j − (j + 1) Y t_{j+1} / t_j`` for j = 1, 2, 3+),

    p_k(w | h) = max(a(h w) − D(a(h w)), 0) / Σ_x a(h x)  +  γ(h) · p_{k−1}(w | h'),
    γ(h) = (D_1 N_1(h ·) + D_2 N_2(h ·) + D_3 N_3+(h ·)) / Σ_x a(h x),

``h'`` the context without its first word, ``N_j(h ·)`` the number of words after ``h`` with an adjusted count of
j (3 or more for the last); a context never seen passes the lower order's probability on unchanged, and the
unigrams are interpolated with the uniform distribution over the vocabulary. A sentence's context starts at its
opening (KenLM's ``<s>``, here ``BOS``, one id past the vocabulary): n-grams never reach into the sentence before.
The model reads the language model's stream (``<eos>`` then each sentence's ids and its ``<eos>``), so ``<eos>``
is predicted as KenLM's ``</s>`` and opens the next sentence.

The n-grams of each order are kept as sorted int64 keys ``context · (V + 1) + w``, where ``context`` is the index
of the n-gram's first k-1 words in the table of order k-1 (the unigrams' index is the id): a context's followers
are one contiguous run of keys, found by binary search. Fitted on the training stream before the network's first
epoch; its adjusted counts are what the run directory stores.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import torch
from pydantic import Field

from seqlab.sections import Section
from seqlab.specials import EOS, PAD

DISCOUNTS = 3  # D_1, D_2, D_3+
NGRAMS = ("a Kneser-Ney n-gram model beside the network (fitted on the training stream), its next-word "
          "probabilities interpolated with the network's (seqlab.model.kneser_ney)")


class KneserNeyConfig(Section):
    """``model.ngrams`` of a language model: the Kneser-Ney model's order and the network's share."""

    order: int = Field(5, ge=2, le=8, description="the n-grams' longest length (words of context + 1)")
    weight: float = Field(0.8, gt=0, lt=1, description="the network's share of the interpolated probabilities; "
                                                       "the n-gram model's is 1 - weight")


def described(cfg: KneserNeyConfig | None) -> str:
    """What a model's description adds for ``model.ngrams``."""
    return "" if cfg is None else f", with a Kneser-Ney {cfg.order}-gram model (weight {cfg.weight})"


class KneserNey:
    """Interpolated modified Kneser-Ney over a vocabulary of ``vocab_size`` ids: ``probabilities(stream)`` of each
    next id, ``distribution(contexts)`` over the vocabulary."""

    def __init__(self, cfg: KneserNeyConfig, vocab_size: int, keys: list[np.ndarray], adjusted: list[np.ndarray],
                 fit_seconds: float = 0.0) -> None:
        self.cfg = cfg
        self.vocab_size = vocab_size
        self.radix = vocab_size + 1  # ids and BOS
        self.bos = vocab_size
        self.keys = keys  # [order 2 … n]: sorted (grams,) int64 keys
        self.adjusted = adjusted  # [order 1 … n]: (grams,) float64 adjusted counts; order 1 indexed by id
        self.fit_seconds = fit_seconds
        self.discounts = [_discounts(a) for a in adjusted]  # [order 1 … n]: (4,): 0, D_1, D_2, D_3+
        self.unigram = self._unigram()  # (V + 1,), BOS's 0
        self.totals, self.gammas = [], []  # [order 2 … n]: per context of order k-1: Σ_x a(h x), γ(h)
        for k in range(2, cfg.order + 1):
            total, gamma = self._context_weights(k)
            self.totals.append(total)
            self.gammas.append(gamma)

    @classmethod
    def fit(cls, cfg: KneserNeyConfig, stream: np.ndarray, vocab_size: int) -> KneserNey:
        """Counted from ``stream`` ((n,) ids: ``<eos>``, then sentences each followed by ``<eos>``)."""
        start = time.perf_counter()
        padded = _opened(stream, vocab_size)
        radix, keys, raw, at = vocab_size + 1, [], [np.bincount(padded, minlength=vocab_size + 1).astype(float)], [padded]
        raw[0][vocab_size] = 0.0  # BOS opens sentences, it is never predicted
        for _ in range(2, cfg.order + 1):  # order k: the k-grams, from the (k-1)-grams before them
            before = np.concatenate([[-1], at[-1][:-1]])  # (n,) the (k-1)-gram ending one position earlier
            valid = (before >= 0) & (padded != vocab_size)  # nothing ends at BOS, nothing reaches across it
            table, index, counts = np.unique(before[valid] * radix + padded[valid], return_inverse=True,
                                             return_counts=True)
            grams = np.full(len(padded), -1, np.int64)
            grams[valid] = index
            keys.append(table)
            raw.append(counts.astype(float))
            at.append(grams)
        adjusted = _adjust(padded, at, raw, vocab_size)
        return cls(cfg, vocab_size, keys, adjusted, time.perf_counter() - start)

    def describe(self) -> str:
        return f"Kneser-Ney {self.cfg.order}-gram model: {sum(map(len, self.keys)) + len(self.adjusted[0]) - 1:,} n-grams"

    def _unigram(self) -> np.ndarray:
        a, d = self.adjusted[0], self.discounts[0]
        discount = d[np.minimum(a, DISCOUNTS).astype(int)] * (a > 0)
        total = a.sum()
        p = np.maximum(a - discount, 0) / total + discount.sum() / total / self.vocab_size
        p[self.bos] = 0.0
        return p

    def _context_weights(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Σ_x a(h x) and γ(h) for every context h of order k's n-grams (the n-grams of order k-1)."""
        contexts = self.keys[k - 2] // self.radix
        a, d = self.adjusted[k - 1], self.discounts[k - 1]
        size = len(self.adjusted[k - 2])
        total = np.bincount(contexts, weights=a, minlength=size)
        removed = np.bincount(contexts, weights=d[np.minimum(a, DISCOUNTS).astype(int)], minlength=size)
        return total, removed / np.maximum(total, 1e-300)

    def _index(self, k: int, before: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The index in order k's table of the n-grams (``before``'s (k-1)-gram, ``ids``); -1 where absent."""
        table = self.keys[k - 2]
        key = np.maximum(before, 0) * self.radix + ids
        found = np.minimum(np.searchsorted(table, key), len(table) - 1)
        return np.where((before >= 0) & (table[found] == key), found, -1)

    def _step_up(self, k: int, p: np.ndarray, context: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """p_k(ids | context) from p_{k-1}; ``context``: the index of each context in order k-1's table (-1: none)."""
        total = np.where(context >= 0, self.totals[k - 2][np.maximum(context, 0)], 0.0)
        seen = total > 0
        gram = self._index(k, np.where(seen, context, -1), ids)
        a = np.where(gram >= 0, self.adjusted[k - 1][np.maximum(gram, 0)], 0.0)
        d = self.discounts[k - 1][np.minimum(a, DISCOUNTS).astype(int)]
        own = np.maximum(a - d, 0) / np.where(seen, total, 1.0)
        return np.where(seen, own + self.gammas[k - 2][np.maximum(context, 0)] * p, p)

    def probabilities(self, stream: np.ndarray) -> np.ndarray:
        """(n - 1,) p(stream[i + 1] | the sentence so far), for the stream ``fit`` reads."""
        padded = _opened(stream, self.vocab_size)
        predicted = padded != self.bos
        p = self.unigram[padded]
        context = np.concatenate([[-1], padded[:-1]])  # (n,) the unigram before each position: its id
        for k in range(2, self.cfg.order + 1):
            p = self._step_up(k, p, context, padded)
            if k < self.cfg.order:  # the context one word longer: the k-gram ending one position earlier
                context = np.concatenate([[-1], self._index(k, context, padded)[:-1]])
        return p[predicted]

    def distribution(self, contexts: np.ndarray) -> np.ndarray:
        """contexts (B, n-1): each row's last n-1 ids, the oldest first (``BOS`` where its sentence opens, -1 before
        that) -> (B, V) p(w | context) for every id w of the vocabulary."""
        p = np.tile(self.unigram[: self.vocab_size], (len(contexts), 1))  # (B, V)
        for k in range(2, self.cfg.order + 1):
            window = contexts[:, len(contexts[0]) - (k - 1):]  # (B, k-1): order k's context
            index = window[:, 0]  # its first id's index among the unigrams: the id (-1: none)
            for j in range(1, k - 1):  # the context's index in order k-1's table, built from its first id
                index = self._index(j + 1, index, window[:, j])
            for b in np.flatnonzero(index >= 0):
                if self.totals[k - 2][index[b]] > 0:
                    p[b] = self._followers(k, int(index[b]), p[b])
        return p

    def _followers(self, k: int, context: int, lower: np.ndarray) -> np.ndarray:
        """p_k(· | context) over the vocabulary from p_{k-1}(· | context') ``lower``: the context's followers are
        one run of order k's keys."""
        table = self.keys[k - 2]
        lo, hi = np.searchsorted(table, [context * self.radix, (context + 1) * self.radix])
        words = table[lo:hi] - context * self.radix
        a = self.adjusted[k - 1][lo:hi]
        total = self.totals[k - 2][context]
        p = self.gammas[k - 2][context] * lower
        p[words] += np.maximum(a - self.discounts[k - 1][np.minimum(a, DISCOUNTS).astype(int)], 0) / total
        return p

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, str]]:
        """The adjusted counts and keys of every order and the JSON metadata ``from_state`` reads back."""
        arrays = {f"adjusted.{k}": np.ascontiguousarray(a) for k, a in enumerate(self.adjusted, start=1)}
        arrays |= {f"keys.{k}": np.ascontiguousarray(t) for k, t in enumerate(self.keys, start=2)}
        meta = {"model": "kneser_ney", "order": self.cfg.order, "vocab_size": self.vocab_size,
                "fit_seconds": self.fit_seconds}
        return arrays, {"ngrams": json.dumps(meta)}

    @classmethod
    def from_state(cls, cfg: KneserNeyConfig, arrays: dict[str, np.ndarray], metadata: dict[str, Any]) -> KneserNey:
        """The model ``state`` described; a ``ValueError`` if it is not one of ``cfg``'s order."""
        if metadata.get("model") != "kneser_ney" or metadata.get("order") != cfg.order:
            raise ValueError(f"saved: {metadata.get('model')} of order {metadata.get('order')}; "
                             f"model.ngrams asks for kneser_ney of order {cfg.order}")
        adjusted = [arrays[f"adjusted.{k}"] for k in range(1, cfg.order + 1)]
        keys = [arrays[f"keys.{k}"] for k in range(2, cfg.order + 1)]
        return cls(cfg, int(metadata["vocab_size"]), keys, adjusted, float(metadata["fit_seconds"]))

    def interpolate(self, net_log_probs: np.ndarray, stream: np.ndarray) -> np.ndarray:
        """(n - 1,) log(w · p_net + (1 - w) · p_kn) of each next id of ``stream``, given the network's log p_net."""
        w = self.cfg.weight
        return np.logaddexp(np.log(w) + net_log_probs, np.log1p(-w) + np.log(self.probabilities(stream)))


def _opened(stream: np.ndarray, vocab_size: int) -> np.ndarray:
    """The stream with ``BOS`` after every ``<eos>`` (opening the next sentence) and without its leading ``<eos>``:
    [<eos>, a, b, <eos>, c, <eos>] -> [BOS, a, b, <eos>, BOS, c, <eos>, BOS]."""
    stream = np.asarray(stream, dtype=np.int64)
    body = stream[1:] if len(stream) and stream[0] == EOS else stream
    opens = np.flatnonzero(body == EOS) + 1  # where a BOS goes
    return np.insert(body, np.concatenate([[0], opens]), vocab_size)


def _adjust(padded: np.ndarray, at: list[np.ndarray], raw: list[np.ndarray], vocab_size: int) -> list[np.ndarray]:
    """Adjusted counts per order: raw at the highest and for n-grams opening a sentence; else the number of
    different words seen before the n-gram (its left extensions among the next order's n-grams)."""
    adjusted = [np.empty(0)] * len(raw)
    adjusted[-1] = raw[-1]
    for k in range(len(raw) - 1, 0, -1):  # order k
        longer, own = at[k], at[k - 1]  # (n,) index of the (k+1)-gram / k-gram ending at each position
        both = longer >= 0
        suffix = np.empty(len(raw[k]), np.int64)
        suffix[longer[both]] = own[both]  # each (k+1)-gram's last k words
        extensions = np.bincount(suffix, minlength=len(raw[k - 1])).astype(float)
        opens = np.zeros(len(raw[k - 1]), bool)
        starts = np.flatnonzero(own >= 0)
        opens[own[starts]] = padded[starts - (k - 1)] == vocab_size if k > 1 else False
        adjusted[k - 1] = np.where(opens, raw[k - 1], extensions)
    adjusted[0][vocab_size] = 0.0
    return adjusted


def _discounts(adjusted: np.ndarray) -> np.ndarray:
    """(4,): 0, D_1, D_2, D_3+ from the counts of counts t_1 … t_4 (Chen & Goodman's estimates)."""
    t = [float(np.sum(adjusted == j)) for j in range(1, 5)]
    fallback = np.array([0.0, 0.5, 1.0, 1.5])  # KenLM's --discount_fallback
    if min(t) == 0:  # too few n-grams to estimate (KenLM refuses without --discount_fallback)
        return fallback
    y = t[0] / (t[0] + 2 * t[1])
    d = np.array([0.0, *(j - (j + 1) * y * t[j] / t[j - 1] for j in (1, 2, 3))])
    return d if all(0 < d[j] <= j for j in (1, 2, 3)) else fallback  # out of range: no distribution otherwise


class Interpolated:
    """A language model under the step contract (``seqlab.decoding.step``) whose next-word log-probabilities are
    ``log(w · softmax(logits) + (1 - w) · p_kn)``: every search strategy decodes the interpolation."""

    def __init__(self, model: Any, ngrams: KneserNey) -> None:
        self.model = model
        self.ngrams = ngrams

    def start(self, src: torch.Tensor) -> InterpolatedState:
        """src (B, P): prompts (``<eos>`` then words, PAD after): each row's context is its prompt's last n-1 ids."""
        rows = [[t for t in row if t != PAD] for row in src.tolist()]
        contexts = np.stack([_context(row, self.ngrams) for row in rows])  # (B, n-1)
        return InterpolatedState(self.model.start(src), contexts, True)

    def step(self, ids: torch.Tensor, state: InterpolatedState,
             need_weights: bool = False) -> tuple[torch.Tensor, InterpolatedState, torch.Tensor | None]:
        """ids (B,) -> (B, V) interpolated log-probabilities (as logits: their softmax is themselves)."""
        logits, inner, weights = self.model.step(ids, state.inner, need_weights)
        contexts = state.contexts
        if not state.fresh:  # the first step's ids are the strategies' <sos>, not words
            contexts = _extend(contexts, ids.cpu().numpy(), self.ngrams.bos)
        w = self.ngrams.cfg.weight
        p_kn = torch.from_numpy(self.ngrams.distribution(contexts)).to(logits.device)  # (B, V) float64
        mixed = torch.logaddexp(torch.log_softmax(logits.double(), -1) + np.log(w), torch.log(p_kn) + np.log1p(-w))
        return mixed.to(torch.float32), InterpolatedState(inner, contexts, False), weights


def _context(prompt: list[int], ngrams: KneserNey) -> np.ndarray:
    """(n-1,) the last n-1 ids of a prompt (``<eos>`` then words), ``BOS`` for its opening ``<eos>``."""
    opened = _opened(np.array(prompt), ngrams.vocab_size)
    last = opened[np.flatnonzero(opened == ngrams.bos)[-1]:]  # the last sentence, from its opening
    width = ngrams.cfg.order - 1
    return np.concatenate([np.full(max(width - len(last), 0), -1), last[-width:]]).astype(np.int64)


def _extend(contexts: np.ndarray, ids: np.ndarray, bos: int) -> np.ndarray:
    """Each row's context moved on by one id; after ``<eos>`` a row's context is a new sentence's opening."""
    moved = np.concatenate([contexts[:, 1:], ids[:, None]], axis=1)
    ended = ids == EOS
    moved[ended] = -1
    moved[ended, -1] = bos
    return moved


class InterpolatedState:
    """The network's decoder state and each row's n-gram context (B, n-1); ``fresh`` before the first step."""

    def __init__(self, inner: Any, contexts: np.ndarray, fresh: bool) -> None:
        self.inner, self.contexts, self.fresh = inner, contexts, fresh

    def select(self, rows: torch.Tensor, same_sources: bool = False) -> InterpolatedState:
        return InterpolatedState(self.inner.select(rows, same_sources), self.contexts[rows.cpu().numpy()], self.fresh)

    def beams(self, k: int) -> InterpolatedState:
        return InterpolatedState(self.inner.beams(k), np.repeat(self.contexts, k, axis=0), self.fresh)

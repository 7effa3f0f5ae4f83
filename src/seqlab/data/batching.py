"""Token ids → padded batches: grouped by length under a token budget, or fixed-size random ones.

``length_batches`` (the default): sentences of similar length go together, so
little compute goes to padding; a batch holds as many sentences as fit in
``batch_tokens`` padded tokens (source + target).

``windowed_batches``: the same a window of chunks at a time (a prepared corpus, ``data.prepared``), so that
memory holds one window of rows, not the corpus.

``random_batches`` (``train.batch_sentences``): the book's way, a fixed number
of sentences drawn in random order. When all sentences are about as long (the
book's addition task: 3 to 7 characters) there is little padding to save, and
length-sorted batches would hold only one kind of problem each, which slows
learning badly (docs/results.md).

Either order is random but fixed by ``(seed, epoch)``, so a resumed run sees
exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from seqlab.specials import EOS, PAD, SOS

log = logging.getLogger("seqlab")


@dataclass
class Batch:
    """One training batch. Teacher forcing: the decoder reads ``trg_in`` and predicts ``trg_out``."""

    src: torch.Tensor  # (batch, src_len): tokens + <eos>, then <pad>
    trg_in: torch.Tensor  # (batch, trg_len): <sos> y1 .. yn, then <pad>
    trg_out: torch.Tensor  # (batch, trg_len): y1 .. yn <eos>, then <pad>

    @property
    def num_target_tokens(self) -> int:
        return int((self.trg_out != PAD).sum())

    def to(self, device: torch.device) -> Batch:
        """The batch on ``device`` (the model's)."""
        return Batch(self.src.to(device), self.trg_in.to(device), self.trg_out.to(device))


def pad(seqs: Sequence[Sequence[int]]) -> torch.Tensor:
    """Right-pad id lists with PAD into a (batch, max_len) tensor."""
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    out = np.full((len(seqs), int(lengths.max())), PAD, dtype=np.int64)
    real = np.arange(out.shape[1]) < lengths[:, None]  # (batch, max_len), True before the padding
    out[real] = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=int(lengths.sum()))
    return torch.from_numpy(out)


def collate(src: Sequence[Sequence[int]], trg: Sequence[Sequence[int]], eos: bool = True) -> Batch:
    """Sources are already ``source_ids``; targets are bare token lists, which the decoder reads after <sos> and
    predicts, then <eos>; without ``eos`` (the book's fixed-width answers, ``data.target_width``) it reads
    <sos> and all but the last token, and predicts the tokens alone."""
    return Batch(
        src=pad(src),
        trg_in=pad([[SOS, *t] if eos else [SOS, *t[:-1]] for t in trg]),
        trg_out=pad([[*t, EOS] if eos else list(t) for t in trg]),
    )


def length_batches(
    src_lengths: Sequence[int] | np.ndarray, trg_lengths: Sequence[int] | np.ndarray, batch_tokens: int,
    seed: int | list[int]
) -> list[np.ndarray]:
    """Index arrays of batches: random order, stably sorted by length, cut at the token budget, shuffled.

    The cost of a batch is ``size × (longest source + longest target + 1)``.
    A sentence longer than the budget still gets a batch of its own.
    """
    rng = np.random.default_rng(seed)
    src_len = np.asarray(src_lengths)
    trg_len = np.asarray(trg_lengths) + 1  # <sos>/<eos>
    order = rng.permutation(len(src_len))
    order = order[np.lexsort((trg_len[order], src_len[order]))]  # by source, then target length

    batches, start, max_src, max_trg = [], 0, 0, 0
    for pos, index in enumerate(order):
        new_src, new_trg = max(max_src, src_len[index]), max(max_trg, trg_len[index])
        if pos > start and (pos - start + 1) * (new_src + new_trg) > batch_tokens:
            batches.append(order[start:pos])
            start, new_src, new_trg = pos, src_len[index], trg_len[index]
        max_src, max_trg = new_src, new_trg
    batches.append(order[start:])
    rng.shuffle(batches)
    return batches


def windowed_batches(
    src_lengths: Sequence[int] | np.ndarray, trg_lengths: Sequence[int] | np.ndarray, chunks: Sequence[int],
    window: int, batch_tokens: int, seed: int
) -> list[np.ndarray]:
    """``length_batches`` with bounded memory: the rows come in ``chunks`` (their sizes, in order: a prepared
    split's record batches), taken ``window`` chunks at a time in an order fixed by ``seed``; each window's rows are
    batched by ``length_batches`` on their own and its batches follow each other, so that a reader holds one window
    of rows at a time. The first window is batched with ``seed`` itself: rows in one window (a corpus in memory)
    are batched exactly as ``length_batches`` batches them."""
    src_len, trg_len = np.asarray(src_lengths), np.asarray(trg_lengths)
    starts = np.cumsum([0, *chunks])
    order = np.random.default_rng([seed, len(chunks)]).permutation(len(chunks))
    batches: list[np.ndarray] = []
    for first in range(0, len(order), window):
        rows = np.concatenate([np.arange(starts[c], starts[c + 1]) for c in order[first:first + window]])
        window_seed = seed if first == 0 else [seed, first]
        batches += [rows[b] for b in length_batches(src_len[rows], trg_len[rows], batch_tokens, window_seed)]
    return batches


def random_batches(num_sentences: int, batch_size: int, seed: int) -> list[np.ndarray]:
    """Index arrays of ``batch_size`` sentences (the last one smaller) in a random order fixed by ``seed``."""
    order = np.random.default_rng(seed).permutation(num_sentences)
    return [order[start : start + batch_size] for start in range(0, num_sentences, batch_size)]

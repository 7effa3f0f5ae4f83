"""Token ids → padded batches: grouped by length under a token budget, or fixed-size random ones.

``length_batches`` (the default): sentences of similar length go together, so
little compute goes to padding; a batch holds as many sentences as fit in
``batch_tokens`` padded tokens (source + target).

``windowed_batches``: the same a window of chunks at a time (a prepared corpus, ``data.prepared``), as
streams (``Stream``) whose batches are made when reached, so that memory holds one window of rows, not the corpus;
with more chunks than a step has batches, one stream for each of the step's parts (each process its own).

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
from collections.abc import Iterator, Sequence, Sized
from dataclasses import dataclass
from typing import Protocol

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


class Lengths(Protocol):
    """A column's row lengths as its rows are read: in chunks (a prepared split's record batches, ``Rows``), or as
    one chunk (rows in memory, ``InMemory``)."""

    def chunk_rows(self) -> list[int]:
        """Each chunk's number of rows, in order."""

    def lengths(self, chunks: np.ndarray) -> np.ndarray:
        """(rows of ``chunks``,) their rows' lengths, chunk after chunk in the order given."""


@dataclass(frozen=True)
class InMemory:
    """The row lengths of a column in memory: one chunk."""

    values: np.ndarray  # (rows,)

    @classmethod
    def of(cls, rows: Sequence[Sized]) -> InMemory:
        return cls(np.fromiter(map(len, rows), dtype=np.int64, count=len(rows)))

    def chunk_rows(self) -> list[int]:
        return [len(self.values)]

    def lengths(self, chunks: np.ndarray) -> np.ndarray:
        return self.values  # chunks is [0]: the one chunk


class BatchStream(Protocol):
    """Batches in training order, as many as ``len`` says; iterating again gives the same batches."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[np.ndarray]: ...


@dataclass(frozen=True)
class Stream:
    """``length_batches`` with bounded memory: the batches of some ``chunks`` of rows, ``window`` chunks at a time;
    each window's rows are batched on their own when the stream reaches it (its lengths read then), and its
    batches follow each other, so that a reader holds one window of rows at a time and nothing of the epoch is
    listed whole. A lone stream's first window is batched with ``seed`` itself: rows in one window (a corpus in
    memory) are batched exactly as ``length_batches`` batches them."""

    chunks: np.ndarray  # (chunks of this stream,) their indices, in the order read
    starts: np.ndarray  # (all chunks + 1,) each chunk's first row
    src: Lengths
    trg: Lengths | None  # None: inputs alone (a classifier's)
    window: int
    batch_tokens: int
    seed: int
    key: tuple[int, ...] = ()  # (streams, which): one of a step's parts; () a lone stream

    def __iter__(self) -> Iterator[np.ndarray]:
        for first in range(0, len(self.chunks), self.window):
            group = self.chunks[first:first + self.window]
            rows = np.concatenate([np.arange(self.starts[c], self.starts[c + 1]) for c in group])
            src = self.src.lengths(group)
            trg = np.zeros_like(src) if self.trg is None else self.trg.lengths(group)
            seed = self.seed if first == 0 and not self.key else [self.seed, *self.key, first]
            yield from (rows[b] for b in length_batches(src, trg, self.batch_tokens, seed))

    def __len__(self) -> int:
        """Its batches, counted by batching every window (their arrays dropped as counted)."""
        return sum(1 for _ in self)


def windowed_batches(src: Lengths, trg: Lengths | None, window: int, batch_tokens: int, seed: int, parts: int = 1
                     ) -> list[BatchStream]:
    """An epoch's token-budget batches of a corpus read in chunks, as streams (``Stream``). Where there are at least
    ``parts`` chunks (a step's batches: processes × ``train.accumulate``), chunk c goes to stream c mod ``parts``
    in every epoch, and a step takes one batch of each stream, so that a process reads its own parts' chunks only,
    the same ones from epoch to epoch (``distributed.EpochSteps``); else there is one stream, of which a step takes
    ``parts`` consecutive batches. A stream takes its chunks in an order fixed by ``seed``."""
    sizes = src.chunk_rows()
    starts = np.cumsum([0, *sizes])
    if parts == 1 or len(sizes) < parts:
        order = np.random.default_rng([seed, len(sizes)]).permutation(len(sizes))
        return [Stream(order, starts, src, trg, window, batch_tokens, seed)]
    dealt = [np.arange(part, len(sizes), parts) for part in range(parts)]
    return [Stream(np.random.default_rng([seed, len(sizes), part]).permutation(chunks), starts, src, trg, window,
                   batch_tokens, seed, (parts, part)) for part, chunks in enumerate(dealt)]


def random_batches(num_sentences: int, batch_size: int, seed: int) -> list[np.ndarray]:
    """Index arrays of ``batch_size`` sentences (the last one smaller) in a random order fixed by ``seed``."""
    order = np.random.default_rng(seed).permutation(num_sentences)
    return [order[start : start + batch_size] for start in range(0, num_sentences, batch_size)]

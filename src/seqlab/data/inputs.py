"""A predictor's inputs before they become tensors: the texts checked, blank ones kept in their places, id lists
cut to what a model reads, a source's encoder ids. No PyTorch here: the ONNX export's search
(``seqlab.export.onnx_search``) runs where PyTorch is not installed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from seqlab.specials import EOS, PAD

T = TypeVar("T")

log = logging.getLogger("seqlab")


def truncate(seqs: list[list[int]], limit: int, what: str) -> list[list[int]]:
    """Every id list cut to ``limit``; a warning says how many of ``what`` were cut."""
    cut = sum(len(s) > limit for s in seqs)
    if cut:
        log.warning("%d of %d %s are longer than %d tokens and were truncated", cut, len(seqs), what, limit)
    return [s[:limit] for s in seqs]


def check_texts(texts: Sequence[str], caller: str) -> None:
    """A TypeError for one string where ``caller`` takes a list of them (a string is a sequence of strings)."""
    if isinstance(texts, str):
        raise TypeError(f"{caller}() takes a list of strings, not one string")


def around_blanks(texts: Sequence[str], work: Callable[[list[str]], list[T]], empty: T) -> list[T]:
    """``work`` over the texts that are not blank; each empty or whitespace-only text gets ``empty`` in its
    place, so that the outputs stay aligned with the inputs (a blank line in, a blank line out)."""
    kept = [text for text in texts if text.strip()]
    done = iter(work(kept) if kept else [])
    return [next(done) if text.strip() else empty for text in texts]


def chunks(items: list[int], size: int) -> Iterator[list[int]]:
    """``items`` in consecutive runs of ``size`` (the last one shorter)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def source_ids(tokens: Sequence[int], eos: bool = True, width: int | None = None, fill: int = PAD) -> list[int]:
    """The encoder input of one sentence: its tokens, then <eos> (unless ``eos`` is false), then, with ``width``,
    ``fill`` up to ``width`` tokens (the book's fixed-width questions, ``data.source_width``)."""
    ids = [*tokens, EOS] if eos else list(tokens)
    return ids + [fill] * (width - len(ids)) if width is not None else ids

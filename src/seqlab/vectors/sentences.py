"""The sentences word2vec trains on, as word ids, in windows: all in memory (one window), or in files on disk read
one window at a time, so that a corpus larger than memory trains in the memory of one window (issue 41; gensim's
``corpus_file`` mode reads its file likewise).

On disk (``OnDisk.write``), a corpus is read once: each block of lines split into words (``tokenizer.split_words``)
and written as provisional ids (the words numbered in order of first occurrence) while they are counted; the
vocabulary (``min_count``, most frequent first, ties in order of first occurrence: ``Vocabulary.build``'s) then maps
them to its ids, the words outside it dropped, in a second pass over the ids alone. The directory holds
``ids.bin`` (int32, every sentence's ids one after the other), ``lengths.bin`` (int32, the words of each sentence)
and ``manifest.json`` (the counts and the windows: each a run of whole sentences of about ``WINDOW_WORDS`` words),
written last, once the ids are on the disk; the directory gets its name when it is whole.
A window is read with ``np.fromfile`` (read into the process's own buffer, not mapped), so the file's pages never
count in its resident memory.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np
from tqdm import tqdm

from seqlab.files import atomic_write, fsync_directory
from seqlab.tokenizer import split_words
from seqlab.vectors.pairs import Vocabulary

WINDOW_WORDS = 1 << 23  # words in a window on disk (8,388,608: 64 MiB as the kernel's int64 ids)
BLOCK_LINES = 100_000  # lines split into words at a time while writing
_IDS, _LENGTHS, _MANIFEST = "ids.bin", "lengths.bin", "manifest.json"


class Sentences(Protocol):
    """Sentences of word ids in windows of whole sentences."""

    @property
    def words(self) -> int:
        """Every window's words."""

    @property
    def window_words(self) -> np.ndarray:
        """(windows,) the words of each window."""

    def window(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Window ``index``'s ids (words,) int64 and the length of each of its sentences (sentences,) int64."""


@dataclass
class InMemory:
    """Every sentence in memory, one window."""

    ids: np.ndarray  # (words,) int64
    lengths: np.ndarray  # (sentences,) int64

    @classmethod
    def of(cls, sentences: Sequence[np.ndarray]) -> InMemory:
        ids = np.concatenate(sentences) if len(sentences) else np.zeros(0)
        return cls(ids.astype(np.int64, copy=False), np.fromiter(map(len, sentences), np.int64, len(sentences)))

    @property
    def words(self) -> int:
        return len(self.ids)

    @property
    def window_words(self) -> np.ndarray:
        return np.array([len(self.ids)], dtype=np.int64)

    def window(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.ids, self.lengths


class OnDisk:
    """A corpus written by ``write``: its windows read from the files when asked for."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        manifest = json.loads((directory / _MANIFEST).read_text(encoding="utf-8"))
        self.words = int(manifest["words"])
        starts = np.array(manifest["windows"], dtype=np.int64).reshape(-1, 2)  # (windows + 1, 2): sentence, word
        self.first_sentence, self.first_word = starts[:, 0], starts[:, 1]
        self.window_words = np.diff(self.first_word)

    def window(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        words = _read(self.directory / _IDS, self.first_word[index], self.window_words[index])
        lengths = _read(self.directory / _LENGTHS, self.first_sentence[index],
                        self.first_sentence[index + 1] - self.first_sentence[index])
        return words.astype(np.int64), lengths.astype(np.int64)

    @classmethod
    def write(cls, texts: Iterable[str], directory: Path, min_count: int, lowercase: bool, morphemes: bool,
              progress: bool | None = None) -> tuple[OnDisk, Vocabulary]:
        """The sentences of ``texts`` (one a line) as words, counted and written as the vocabulary's ids into the new
        directory ``directory`` (made under a temporary name and renamed when whole); returns it and the vocabulary."""
        partial = directory.with_name(directory.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        words, counts = _provisional(texts, partial, lowercase, morphemes, progress)
        vocabulary, mapping = Vocabulary.counted(words, counts, min_count)
        manifest = _remap(partial, mapping)
        for name in (_IDS, _LENGTHS):
            (partial / f"provisional-{name}").unlink()
        atomic_write(partial / _MANIFEST, json.dumps(manifest))  # after the ids reached the disk (``_remap``)
        shutil.rmtree(directory, ignore_errors=True)  # a killed run's, whose vocabulary was not saved
        os.replace(partial, directory)
        fsync_directory(directory.parent)
        return cls(directory), vocabulary

    @classmethod
    def written(cls, directory: Path) -> OnDisk | None:
        """The corpus a killed run wrote whole, else None."""
        return cls(directory) if (directory / _MANIFEST).is_file() else None


def _read(path: Path, start: int | np.integer, count: int | np.integer) -> np.ndarray:
    """``count`` int32 values of the file from value ``start``."""
    with open(path, "rb") as f:
        return np.fromfile(f, dtype=np.int32, count=int(count), offset=4 * int(start))


def _provisional(texts: Iterable[str], directory: Path, lowercase: bool, morphemes: bool,
                 progress: bool | None) -> tuple[list[str], np.ndarray]:
    """Every sentence's words as provisional ids (words numbered by first occurrence) into the directory's
    ``provisional-*`` files; returns the words in that order and how often each occurs."""
    number: dict[str, int] = {}
    counts = np.zeros(0, dtype=np.int64)
    with (open(directory / f"provisional-{_IDS}", "wb") as ids_file,
          open(directory / f"provisional-{_LENGTHS}", "wb") as lengths_file,
          tqdm(desc="count words", unit=" words", unit_scale=True, leave=False,
               disable=None if progress is None else not progress) as bar):
        lines = iter(texts)
        while block := list(itertools.islice(lines, BLOCK_LINES)):
            sentences = split_words(block, lowercase, morphemes)
            ids = np.fromiter((number.setdefault(w, len(number)) for s in sentences for w in s), dtype=np.int32)
            counts = np.pad(counts, (0, len(number) - len(counts)))
            counts += np.bincount(ids, minlength=len(number))
            _append(ids_file, ids)
            _append(lengths_file, np.fromiter(map(len, sentences), np.int32, len(sentences)))
            bar.update(len(ids))
    return list(number), counts


def _append(f: BinaryIO, values: np.ndarray) -> None:
    f.write(values.astype(np.int32, copy=False).tobytes())


def _remap(directory: Path, mapping: np.ndarray) -> dict[str, object]:
    """The provisional files as the vocabulary's ids, dropped words left out, into ``ids.bin`` and
    ``lengths.bin``, a block of sentences at a time; returns the manifest: the counts, and the windows, each cut
    after the sentence that takes the words past the next multiple of ``WINDOW_WORDS``."""
    words, sentences, windows = 0, 0, [[0, 0]]
    with (open(directory / f"provisional-{_LENGTHS}", "rb") as lengths_source,
          open(directory / f"provisional-{_IDS}", "rb") as ids_source,
          open(directory / _IDS, "wb") as ids_file, open(directory / _LENGTHS, "wb") as lengths_file):
        while len(block := np.fromfile(lengths_source, dtype=np.int32, count=BLOCK_LINES)):  # (sentences,)
            ids = mapping[np.fromfile(ids_source, dtype=np.int32, count=int(block.sum()))]  # (words,), -1 dropped
            kept = ids >= 0
            lengths = np.bincount(np.repeat(np.arange(len(block)), block)[kept], minlength=len(block))
            _append(ids_file, ids[kept])
            _append(lengths_file, lengths)
            ends = words + np.cumsum(lengths)  # (sentences,) the words up to each sentence's end
            while len(ends) and ends[-1] >= (windows[-1][1] // WINDOW_WORDS + 1) * WINDOW_WORDS:
                last = int(np.searchsorted(ends, (windows[-1][1] // WINDOW_WORDS + 1) * WINDOW_WORDS))
                windows.append([sentences + last + 1, int(ends[last])])
            words, sentences = words + int(lengths.sum()), sentences + len(block)
        for f in (ids_file, lengths_file):  # on the disk before the manifest says they are whole (and written
            f.flush()  # back now, not while the kernel trains)
            os.fsync(f.fileno())
    if windows[-1] != [sentences, words]:
        windows.append([sentences, words])
    return {"words": words, "sentences": sentences, "windows": windows, "window_words": WINDOW_WORDS}

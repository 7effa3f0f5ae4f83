"""Download the public corpora into the data directory: ``seqlab data fetch NAME``.

Every file is named by its place in the data directory (the layout the configs
expect: ``chatbot_ko/ChatbotData.csv``, ``multi30k/train.de.gz``, ``dlfs2/date.txt``),
the address it is published at, and the SHA-256 of its bytes (for PTB, whose copies
differ and which has no published checksum: its numbers of lines and words). A fetch

1. skips a file that is already there with the right checksum;
2. otherwise streams it to a temporary file beside its destination, hashing as it
   goes, and retries a dropped connection (from the start, a few times);
3. renames it into place only when the checksum matches (``seqlab.files.atomic_open``),
   so a corrupted or cut download never replaces anything, and nothing half-written
   is ever left under the real name.

``mirror`` replaces the publishers' addresses with one server laid out like the
data directory (``MIRROR/multi30k/train.de.gz``): for machines behind a proxy
cache, and for the tests, which serve fixture files on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

from seqlab.files import atomic_open

logger = logging.getLogger("seqlab")

ATTEMPTS = 3  # per file; a dropped connection or a bad checksum starts the download again
CHUNK = 1 << 16


class FetchError(RuntimeError):
    """A file that could not be fetched; the message names its address and what went wrong."""


@dataclass(frozen=True)
class Remote:
    """A file to fetch and how to know it is the right one: the SHA-256 of its published bytes, or, for a
    corpus whose copies differ in bytes and that has no published checksum (PTB), its known numbers of
    lines and of words (whitespace-separated)."""

    path: str  # where it goes, relative to the data directory
    url: str  # where it is published
    sha256: str | None = None
    counts: tuple[int, int] | None = None  # (lines, words)

    def check(self, digest: str, counts: tuple[int, int]) -> str | None:
        """What is wrong with a file of this digest and these counts; None if it is the right file."""
        if self.sha256 is not None and digest != self.sha256:
            return f"SHA-256 {digest}, expected {self.sha256} (a corrupted or changed file)"
        if self.counts is not None and counts != self.counts:
            return (f"{counts[0]:,} lines and {counts[1]:,} words, expected {self.counts[0]:,} and "
                    f"{self.counts[1]:,} (a corrupted or different file)")
        return None


_MULTI30K = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
_DLFS2 = "https://raw.githubusercontent.com/oreilly-japan/deep-learning-from-scratch-2/master/dataset/"
_PTB = "https://raw.githubusercontent.com/tomsercu/lstm/master/data/"  # where the book's dataset/ptb.py reads it

DATASETS: dict[str, list[Remote]] = {
    # songys/Chatbot_data (MIT): 11,823 Korean question/answer pairs with a label
    "chatbot-ko": [
        Remote("chatbot_ko/ChatbotData.csv",
               "https://raw.githubusercontent.com/songys/Chatbot_data/master/ChatbotData.csv",
               "287eb129695b577321c80ad397bb3c2279164d4ca577874d129fd3db5b30afe2"),
    ],
    # multi30k/dataset, task 1, raw: train 29,000 / val 1,014 / test2016 1,000 pairs
    "multi30k": [
        Remote(f"multi30k/{name}", _MULTI30K + name, sha256) for name, sha256 in [
            ("train.de.gz", "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6"),
            ("train.en.gz", "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f"),
            ("val.de.gz", "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a"),
            ("val.en.gz", "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28"),
            ("test_2016_flickr.de.gz", "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8"),
            ("test_2016_flickr.en.gz", "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9"),
        ]
    ],
    # oreilly-japan/deep-learning-from-scratch-2 (MIT): the book's addition and date-format tasks
    "dlfs2": [
        Remote(f"dlfs2/{name}", _DLFS2 + name, sha256) for name, sha256 in [
            ("addition.txt", "34e0746f5014c11311c9452ee9050bf14e38eca44ec4aaf4d81eba2b38674009"),
            ("date.txt", "62e66a301ce8537868e725512d2a45663fc366526b7e42028cb703bda2b1c79a"),
        ]
    ],
    # the Penn Treebank as Mikolov's language-model experiments preprocessed it (the book's ch. 5–6 corpus):
    # one sentence per line, 10,000 words, <unk> for the rest; checked by its lines and words
    "ptb": [
        Remote(f"ptb/ptb.{split}.txt", f"{_PTB}ptb.{split}.txt", counts=counts) for split, counts in [
            ("train", (42_068, 887_521)), ("valid", (3_370, 70_390)), ("test", (3_761, 78_669)),
        ]
    ],
}


def fetch(name: str, data_dir: Path, mirror: str | None = None, progress: bool | None = None) -> list[Path]:
    """Make sure every file of dataset ``name`` is in ``data_dir`` with the right checksum; returns their paths."""
    if name not in DATASETS:
        raise FetchError(f"unknown dataset {name!r} (known: {', '.join(sorted(DATASETS))})")
    paths = []
    for remote in DATASETS[name]:
        dest = data_dir / remote.path
        if dest.exists() and remote.check(*_measure(dest)) is None:
            logger.info("%s: already there", dest)
        else:
            url = mirror.rstrip("/") + "/" + remote.path if mirror else remote.url
            _download(url, dest, remote, progress)
            logger.info("%s: fetched from %s", dest, url)
        paths.append(dest)
    return paths


class _Measure:
    """The SHA-256 and the line and word counts of bytes seen chunk by chunk."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.lines = self.words = 0
        self.tail = b""  # the unfinished last line

    def update(self, chunk: bytes) -> None:
        self.digest.update(chunk)
        *complete, self.tail = (self.tail + chunk).split(b"\n")
        self.lines += len(complete)
        self.words += sum(len(line.split()) for line in complete)

    def result(self) -> tuple[str, tuple[int, int]]:
        last = int(bool(self.tail.strip()))  # a last line without its newline still counts
        return self.digest.hexdigest(), (self.lines + last, self.words + len(self.tail.split()))


def _measure(path: Path) -> tuple[str, tuple[int, int]]:
    measure = _Measure()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            measure.update(chunk)
    return measure.result()


class _BadChecksum(Exception):
    pass


def _download(url: str, dest: Path, remote: Remote, progress: bool | None) -> None:
    """Stream ``url`` into a temporary file beside ``dest``; it replaces ``dest`` only if it checks out."""
    problem = ""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with atomic_open(dest) as out:
                wrong = remote.check(*_stream(url, out, dest.name, progress))
                if wrong:
                    raise _BadChecksum(wrong)
            return
        except urllib.error.HTTPError as exc:
            raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from None
        except _BadChecksum as exc:
            problem = str(exc)
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            problem = f"connection failed: {getattr(exc, 'reason', exc)}"
        logger.warning("%s: attempt %d of %d: %s", url, attempt, ATTEMPTS, problem)
    raise FetchError(f"{url}: {problem}; {dest} was left as it was")


def _stream(url: str, out: BinaryIO, label: str, progress: bool | None) -> tuple[str, tuple[int, int]]:
    """Copy the body of ``url`` into ``out``; returns its SHA-256 and its (lines, words). A body shorter than
    announced raises."""
    measure, received = _Measure(), 0
    with urllib.request.urlopen(url, timeout=60) as response:
        total = int(response.headers.get("Content-Length") or 0) or None
        with tqdm(total=total, unit="B", unit_scale=True, desc=label, leave=False,
                  disable=None if progress is None else not progress) as bar:
            while chunk := response.read(CHUNK):
                measure.update(chunk)
                out.write(chunk)
                received += len(chunk)
                bar.update(len(chunk))
    if total is not None and received < total:  # http.client returns a cut body without complaint
        raise http.client.IncompleteRead(b"", total - received)
    return measure.result()

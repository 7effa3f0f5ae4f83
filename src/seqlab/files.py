"""Atomic file writes: a file appears under its name complete, or not at all.

Everything seqlab saves (run directories, downloaded corpora) is written to a
temporary file in the destination's directory, flushed to disk, and renamed
over the destination (``os.replace`` is atomic on POSIX and Windows); then the
directory itself is flushed, so that the rename survives a power cut too (where
directories can be opened: not on Windows). A process killed mid-write leaves
the old file, never a half-written one; it does leave its temporary file,
``.NAME.XXXXXXXX.tmp`` beside NAME, which ``remove_temporaries`` deletes once
nothing writes to the directory (a killed run about to be resumed). A write
that fails (a full disk) leaves the old file and no temporary one, and its
``OSError`` names the destination.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

# atomic_open's temporary file for NAME: ``.NAME.`` + mkstemp's 8 random characters (letters, digits, _) + ``.tmp``
TEMPORARY_PREFIX, TEMPORARY_SUFFIX = ".", ".tmp"
_TEMPORARY = re.compile(rf"^{re.escape(TEMPORARY_PREFIX)}.+\.[a-z0-9_]{{8}}{re.escape(TEMPORARY_SUFFIX)}$")


@contextlib.contextmanager
def atomic_open(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file for ``path``: renamed into place when the block ends, deleted if it raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{TEMPORARY_PREFIX}{path.name}.", suffix=TEMPORARY_SUFFIX)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # "[Errno 28] No space left on device: 'RUN/model.safetensors'"
        raise
    fsync_directory(path.parent)


def atomic_write(path: str | Path, data: bytes | str) -> None:
    """Write ``data`` (str as UTF-8) to ``path`` atomically."""
    with atomic_open(path) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def remove_temporaries(directory: str | Path) -> int:
    """Delete the temporary files that writes killed before their rename left in ``directory`` (not in its
    subdirectories): plain files named as ``atomic_open`` names them. Only for a directory that nothing writes to
    at the moment (a temporary file of a write under way would go too). Returns how many were deleted; none for a
    directory that does not exist."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return 0
    removed = 0
    for entry in entries:
        if _TEMPORARY.match(entry.name) and entry.is_file(follow_symlinks=False):
            Path(entry.path).unlink(missing_ok=True)
            removed += 1
    return removed


def fsync_directory(directory: str | Path) -> None:
    """Flush ``directory``'s entries (a rename into it) to disk; nothing where a directory cannot be opened."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:  # Windows opens no directory
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask

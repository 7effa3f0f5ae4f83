"""Atomic writes: a file appears complete under its name, or the old one stays."""

import errno
import os
import stat
from pathlib import Path

import pytest

from seqlab.files import atomic_open, atomic_write


def test_atomic_write_never_leaves_a_broken_file(tmp_path, monkeypatch):
    target = tmp_path / "model.json"
    atomic_write(target, "old")

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        atomic_write(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["model.json"]  # no temporary file left behind


def test_a_block_that_raises_keeps_the_old_file(tmp_path):
    target = tmp_path / "data.bin"
    atomic_write(target, b"old")
    with pytest.raises(ValueError), atomic_open(target) as f:
        f.write(b"half of the new")
        raise ValueError("checksum mismatch")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["data.bin"]


def test_written_files_get_the_usual_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "a" / "b.txt", "x")  # the folder is made too
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a" / "b.txt").stat().st_mode) == 0o644


def test_the_directory_is_synced_after_the_rename(tmp_path, monkeypatch):
    events: list[tuple[str, bool | str]] = []  # ("fsync", of a directory?) or ("replace", the destination)
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", stat.S_ISDIR(os.fstat(fd).st_mode)))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    atomic_write(tmp_path / "model.json", "new")
    assert events == [("fsync", False), ("replace", str(tmp_path / "model.json")), ("fsync", True)]


def test_a_directory_that_cannot_be_opened_is_not_synced(tmp_path, monkeypatch):
    real_open = os.open

    def no_directories(path, flags, *args):  # as on Windows, where a directory cannot be opened
        if Path(path).is_dir():
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", no_directories)
    atomic_write(tmp_path / "a.txt", "x")
    assert (tmp_path / "a.txt").read_text() == "x"


def test_a_full_disk_keeps_the_old_file_and_names_the_new_one(tmp_path, monkeypatch):
    target = tmp_path / "checkpoint.safetensors"
    atomic_write(target, b"old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match=r"No space left on device: '.*checkpoint.safetensors'"):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.safetensors"]


def test_the_temporary_files_of_killed_writes_are_removed(tmp_path):
    from seqlab.files import remove_temporaries

    atomic_write(tmp_path / "model.json", "old")
    killed = [atomic_open(tmp_path / name) for name in ("model.json", "checkpoint.safetensors")]
    for write in killed:  # a write that never reaches its rename, as in a process killed mid-save
        write.__enter__().write(b"half of the new")
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp"))
    assert len(left) == 2 and all(name.startswith((".model.json.", ".checkpoint.safetensors.")) for name in left)
    kept = [".hidden", "notes.tmp", ".a.tmp", ".a.b.tmp", ".a.abcdefgh.tmp.bak"]  # not atomic_open's names
    for name in kept:
        (tmp_path / name).write_text("mine")
    (tmp_path / ".a.abcdefgh.tmp").mkdir()  # a directory, whatever its name
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".x.abcdefgh.tmp").write_text("another directory's")
    assert remove_temporaries(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, ".a.abcdefgh.tmp", "model.json", "sub"])
    assert (tmp_path / "model.json").read_text() == "old" and (tmp_path / "sub" / ".x.abcdefgh.tmp").exists()
    assert remove_temporaries(tmp_path) == 0 and remove_temporaries(tmp_path / "missing") == 0

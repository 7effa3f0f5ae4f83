"""Atomic writes: a file appears complete under its name, or the old one stays."""

import os
import stat

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

"""Atomic writes (``files.write_atomic``): the whole new text, or the old file untouched."""

import os

import pytest

from workbench.engine.base.files import write_atomic


def test_a_write_replaces_the_file_whole_in_text_or_bytes(tmp_path):
    path = tmp_path / "deep" / "f.bin"
    assert write_atomic(path, "old") == path and path.read_text() == "old"
    write_atomic(path, b"\x00new")
    assert path.read_bytes() == b"\x00new" and [p.name for p in path.parent.iterdir()] == ["f.bin"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path, monkeypatch):
    path = tmp_path / "f.txt"
    write_atomic(path, "old")

    def full(fd: int) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["f.txt"]

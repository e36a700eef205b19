"""utils.files: a generated file is written only when its text changes."""

from __future__ import annotations

import os

import pytest

from utils.files import holds, write_if_changed


def test_writes_a_new_file_and_its_folders(tmp_path):
    path = tmp_path / "a" / "b" / "c.txt"
    assert write_if_changed(path, "é\n") is True
    assert path.read_bytes() == "é\n".encode()


def test_leaves_a_file_that_holds_the_text_untouched(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("same\n", encoding="utf-8")
    os.utime(path, (1, 1))
    assert write_if_changed(path, "same\n") is False
    assert path.stat().st_mtime == 1  # not rewritten: the timestamp is the one set above


def test_rewrites_a_file_whose_text_differs(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("old\n", encoding="utf-8")
    assert write_if_changed(path, "new\n") is True and path.read_text(encoding="utf-8") == "new\n"
    assert holds(path, "new\n") and not holds(path, "old\n") and not holds(tmp_path / "absent", "")


def test_text_must_be_a_string(tmp_path):
    with pytest.raises(TypeError, match="text must be a str"):
        write_if_changed(tmp_path / "c.txt", b"bytes")

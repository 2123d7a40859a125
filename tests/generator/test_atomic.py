"""Writes are all or nothing: a failure on any file leaves every file as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.atomic import write_all_or_nothing


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_both_files_are_replaced(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("old a")
    write_all_or_nothing({a: b"new a", b: b"new b"})
    assert (a.read_text(), b.read_text()) == ("new a", "new b")
    assert _leftovers(tmp_path) == []


def test_failure_while_staging_writes_nothing(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.write_text("old a")
    with pytest.raises(FileNotFoundError):
        write_all_or_nothing({a: b"new a", tmp_path / "missing" / "b": b"new b"})
    assert a.read_text() == "old a"
    assert _leftovers(tmp_path) == []


def test_failure_while_renaming_puts_back_what_was_already_replaced(tmp_path: Path) -> None:
    a, blocker = tmp_path / "a", tmp_path / "b"
    a.write_text("old a")
    blocker.mkdir()  # a file cannot replace a directory: the second rename fails after the first
    (blocker / "keep").write_text("x")
    with pytest.raises(OSError):
        write_all_or_nothing({a: b"new a", blocker: b"new b"})
    assert a.read_text() == "old a"
    assert (blocker / "keep").read_text() == "x"
    assert _leftovers(tmp_path) == []

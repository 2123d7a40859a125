"""Writes are all or nothing: a failure on any file leaves every file as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from balance_dev.project_files import REPO_ROOT
from generator.atomic import write_all_or_nothing
from generator.errors import FileRefused


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


def test_a_target_that_is_not_a_regular_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    a, blocker, fifo = tmp_path / "a", tmp_path / "b", tmp_path / "fifo"
    a.write_text("old a")
    blocker.mkdir()
    (blocker / "keep").write_text("x")
    os.mkfifo(fifo)  # reading it would block forever: refused from its mode alone
    for target in (blocker, fifo):
        with pytest.raises(FileRefused, match="not a regular file"):
            write_all_or_nothing({a: b"new a", target: b"new b"})
    assert a.read_text() == "old a"
    assert (blocker / "keep").read_text() == "x"
    assert _leftovers(tmp_path) == []


# Runs in its own interpreter: an audit hook cannot be removed, so it must not outlive the test.
# It fires before the operating system performs the rename it announces.
_RENAME_HOOK = """
import os, signal, sys
from pathlib import Path
from generator.atomic import write_all_or_nothing

folder, action = Path(sys.argv[1]), sys.argv[2]
renames = 0

def hook(event, args):
    global renames
    if event == "os.rename" and not str(args[1]).endswith(".tmp"):
        renames += 1
        if renames == 2:
            if action == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise OSError(5, "injected failure of the second rename", str(args[1]))

sys.addaudithook(hook)
try:
    write_all_or_nothing({folder / "first": b"new first", folder / "second": b"new second"})
except OSError as exc:
    print("raised:", exc)
"""


def _run_with_rename_hook(folder: Path, action: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _RENAME_HOOK, str(folder), action],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
        timeout=60,
    )


def test_failure_while_renaming_puts_back_what_was_already_replaced(tmp_path: Path) -> None:
    (tmp_path / "first").write_text("old first")
    (tmp_path / "second").write_text("old second")
    result = _run_with_rename_hook(tmp_path, "raise")
    assert "raised: [Errno 5] injected failure" in result.stdout, result.stderr
    assert (tmp_path / "first").read_text() == "old first"
    assert (tmp_path / "second").read_text() == "old second"
    assert _leftovers(tmp_path) == []


def test_a_kill_between_renames_leaves_the_earlier_ones_done_in_the_order_given(tmp_path: Path) -> None:
    """What ``bump`` relies on: the file given last (the pin) is the one still old after a SIGKILL."""
    (tmp_path / "first").write_text("old first")
    (tmp_path / "second").write_text("old second")
    result = _run_with_rename_hook(tmp_path, "kill")
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert (tmp_path / "first").read_text() == "new first"
    assert (tmp_path / "second").read_text() == "old second"

"""The CLI as tests call it: in-process against a project copy, and its one error line."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from generator.cli import main


def run(root: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--root", str(root), *args], catch_exceptions=False)


def one_error_line(result: Result) -> str:
    """The one `balance-patchgen: error:` line every failure prints (asserting there is exactly one)."""
    lines = [line for line in result.stderr.splitlines() if line.startswith("balance-patchgen: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]

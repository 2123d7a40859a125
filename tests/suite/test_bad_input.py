"""The suite target's bad input, each one line: a vLLM B with no wheel to run, a venv pip could not make."""

from __future__ import annotations

from pathlib import Path

import pytest

from balance_dev.package_index import serve
from balance_dev.suite import cli, venvs


def test_a_release_without_a_wheel_is_refused() -> None:
    files = {"vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl": b"w", "vllm-0.34.0.tar.gz": b"s"}
    with serve(files) as url:
        assert cli.has_wheel("0.33.0", url)
        assert not cli.has_wheel("0.34.0", url)  # an sdist only: nothing to install on CPU torch
        assert not cli.has_wheel("0.3", url)  # a prefix of another release is not that release


def test_the_package_pip_could_not_install_is_named(tmp_path: Path) -> None:
    log = tmp_path / "install.log"
    log.write_text(
        "$ pip install foo\nCollecting foo\n"
        "ERROR: Could not find a version that satisfies the requirement xlite==9.9 (from versions: none)\n"
        "ERROR: No matching distribution found for xlite==9.9\n",
        encoding="utf-8",
    )
    assert venvs.pip_error(log) == "ERROR: No matching distribution found for xlite==9.9"
    assert venvs.pip_error(tmp_path / "none.log") == "no pip error line"


def test_a_run_cut_short_is_never_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A run that completed once leaves its meta; the same label run again and cut short (the harness killed
    # mid-run: a restart, ^C) must not leave that old meta beside its partial records, or --reuse-runs would
    # count the tests it never ran as passing. Cut short here where pytest would be running.
    from balance_dev.suite import run

    work, tree = tmp_path / "work", tmp_path / "tree"
    work.mkdir()
    tree.mkdir()
    (work / "at-vB.meta.json").write_text('{"seconds": 1, "status": 0, "command": []}\n')
    (work / "at-vB.log").write_text("an earlier, complete run\n")
    (work / "at-vB.records.jsonl").write_text("")

    def cut(*args: object, **kwargs: object) -> int:
        (work / "at-vB.log").write_text("half a run\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "run_logged", cut)
    with pytest.raises(KeyboardInterrupt):
        run.run_suite("at-vB", tmp_path / "python", tree, work, ["tests"], 60)
    assert not run.has_run("at-vB", work)

"""`balance-patchgen seam`: the diff on stdout applies to upstream's file; the PR text goes to stderr."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from balance_dev.upstream_repo import build_vllm_repo
from generator.builder import seam
from generator.cli import main
from generator.pins.pin import PIN_FILE
from generator.sources.base import UPSTREAM_PATH, UpstreamFile


def test_seam_prints_a_diff_that_git_applies_and_the_description_apart(
    project: Path, upstream_pinned: UpstreamFile, tmp_path: Path
) -> None:
    result = CliRunner().invoke(main, ["--root", str(project), "seam", "--source", "installed"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"diff --git a/{UPSTREAM_PATH} b/{UPSTREAM_PATH}\n")
    assert "Behaviour: unchanged." in result.stderr and "Behaviour" not in result.stdout
    checkout = tmp_path / "vllm"
    (checkout / UPSTREAM_PATH).parent.mkdir(parents=True)
    (checkout / UPSTREAM_PATH).write_bytes(upstream_pinned.data)
    applied = subprocess.run(["git", "apply"], input=result.stdout, text=True, cwd=checkout, capture_output=True)
    assert applied.returncode == 0, applied.stderr
    assert (checkout / UPSTREAM_PATH).read_text() == seam.make_seam(upstream_pinned).patched


def test_seam_output_writes_the_diff_and_prints_the_description(project: Path) -> None:
    out = project / "seam.diff"
    result = CliRunner().invoke(main, ["--root", str(project), "seam", "--source", "installed", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("diff --git ")
    assert result.stdout.startswith("[Core] Scheduler: make the WAITING admission cap")


SEAM_TAG = "v9.9.0"  # a future release that carries the seam, in a real git repository built here


@pytest.fixture
def seam_repo(tmp_path: Path, upstream_pinned: UpstreamFile) -> Path:
    patched = seam.make_seam(upstream_pinned).patched.encode()
    return build_vllm_repo(tmp_path / "vllm-src", [(upstream_pinned.tag, upstream_pinned.data), (SEAM_TAG, patched)])


def _run(project: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--root", str(project), *args])


def test_on_a_release_with_the_seam_the_copy_is_stale_and_regen_removes_it(project: Path, seam_repo: Path) -> None:
    module = project / "generated" / "balance_scheduler.py"
    assert module.exists()
    stale = _run(project, "check", "--tag", SEAM_TAG, "--vllm-repo", str(seam_repo))
    assert stale.exit_code == 1
    assert "is stale: vLLM v9.9.0 has Scheduler._should_stop_admitting_waiting()" in stale.stderr
    assert _run(project, "verify", "--tag", SEAM_TAG, "--vllm-repo", str(seam_repo)).exit_code == 1
    removed = _run(project, "regen", "--tag", SEAM_TAG, "--vllm-repo", str(seam_repo))
    assert removed.exit_code == 0 and "needs no copy; removed" in removed.stdout
    assert not module.exists()
    clean = _run(project, "check", "--tag", SEAM_TAG, "--vllm-repo", str(seam_repo))
    assert clean.exit_code == 0 and "nothing to check" in clean.stdout
    matrix = _run(project, "matrix", SEAM_TAG, "--vllm-repo", str(seam_repo))
    assert matrix.exit_code == 0 and "needs no copy" in matrix.stdout


def test_bump_to_a_release_with_the_seam_moves_the_pin_and_drops_the_copy(project: Path, seam_repo: Path) -> None:
    result = _run(project, "bump", SEAM_TAG, "--vllm-repo", str(seam_repo))
    assert result.exit_code == 0, result.output
    assert (project / PIN_FILE).read_text() == f"{SEAM_TAG}\n"
    assert not (project / "generated" / "balance_scheduler.py").exists()
    assert _run(project, "check", "--vllm-repo", str(seam_repo)).exit_code == 0

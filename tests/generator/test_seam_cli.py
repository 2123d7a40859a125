"""`balance-patchgen seam`: the diff on stdout applies to upstream's file; the PR text goes to stderr."""

from __future__ import annotations

import subprocess
from pathlib import Path

from click.testing import CliRunner

from generator import seam
from generator.cli import main
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

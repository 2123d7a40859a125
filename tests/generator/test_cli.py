"""The CLI end to end (click's CliRunner against a copy of the project), exit codes included."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from balance_dev.cli_run import one_error_line as _one_error_line
from balance_dev.cli_run import run
from balance_dev.project_files import REPO_ROOT, snapshot
from balance_dev.upstream_edits import without_cap_check
from balance_dev.upstream_repo import build_vllm_repo
from generator.pins.pin import PIN_FILE
from generator.sources.base import UpstreamFile

OUTPUT = Path("generated/balance_scheduler.py")


@pytest.fixture
def vllm_repo(tmp_path: Path, upstream_pinned: UpstreamFile, upstream_older: UpstreamFile) -> Path:
    return build_vllm_repo(tmp_path / "vllm-src", [(u.tag, u.data) for u in (upstream_older, upstream_pinned)])


def test_committed_module_is_up_to_date_and_verifies(project: Path) -> None:
    result = run(project, "check")
    assert result.exit_code == 0, result.output
    assert "is up to date" in result.stdout
    result = run(project, "verify")
    assert result.exit_code == 0, result.output
    assert "plus exactly" in result.stdout  # the wording of the delta list belongs to verify


def test_regen_rewrites_the_same_bytes(project: Path) -> None:
    before = (project / OUTPUT).read_bytes()
    (project / OUTPUT).unlink()
    assert run(project, "regen").exit_code == 0
    assert (project / OUTPUT).read_bytes() == before == (REPO_ROOT / OUTPUT).read_bytes()


def test_hand_edit_is_drift_with_a_diff_and_cause(project: Path) -> None:
    path = project / OUTPUT
    # The RUNNING loop's head, whatever the pinned release spells around it.
    loop = re.search(r"^ +while .*token_budget > 0:$", path.read_text(), re.MULTILINE)
    assert loop is not None
    edited = loop.group().replace("> 0", "> 1")
    path.write_text(path.read_text().replace(loop.group(), edited, 1))
    before = snapshot(project)
    result = run(project, "check")
    assert result.exit_code == 1
    assert f"-{edited}\n" in result.stdout
    assert f"+{loop.group()}\n" in result.stdout
    assert "edited by hand" in _one_error_line(result)
    assert snapshot(project) == before
    github = run(project, "check", "--format", "github")
    assert github.exit_code == 1
    assert f"::error file={OUTPUT},line=" in github.stdout


def test_pin_changed_without_regen_names_that_cause(
    project: Path, vllm_repo: Path, upstream_older: UpstreamFile
) -> None:
    (project / PIN_FILE).write_text(f"{upstream_older.tag}\n")
    before = snapshot(project)
    result = run(project, "check", "--vllm-repo", str(vllm_repo))
    assert result.exit_code == 1
    line = _one_error_line(result)
    assert f"the pin says {upstream_older.tag}" in line and "make regen" in line
    assert snapshot(project) == before


@pytest.mark.parametrize(
    "pin",
    [
        b"",
        b"  \n\t",
        b"0.24.0",
        b"v0.24.0/../../etc",
        b"--upload-pack=touch x",
        b"v0.24.0;rm -rf /",
        b"\xff\xfe",
        b"main",
        b"refs/tags/v0.24.0",
        b"v0.24.0 v0.25.0",
    ],
)
def test_bad_pin_is_exit_2_and_changes_nothing(project: Path, pin: bytes) -> None:
    (project / PIN_FILE).write_bytes(pin)
    before = snapshot(project)
    for command in (["regen"], ["check"], ["verify"], ["bump", "v0.23.0"]):
        result = run(project, *command)
        assert result.exit_code == 2, (command, result.output)
        assert "pin file" in _one_error_line(result)
    assert snapshot(project) == before


def test_pin_is_read_like_tr_delete_space(project: Path) -> None:
    pinned = (project / PIN_FILE).read_text().strip()
    (project / PIN_FILE).write_text(f"  {pinned[:3]} \n{pinned[3:]}\t\n")
    assert run(project, "check").exit_code == 0


def test_bad_tag_option_is_exit_2(project: Path) -> None:
    result = run(project, "regen", "--tag", "HEAD~1")
    assert result.exit_code == 2
    assert "--tag 'HEAD~1' is not a plain vLLM release tag" in _one_error_line(result)


def test_unknown_tag_is_exit_3_and_changes_nothing(project: Path, vllm_repo: Path) -> None:
    before = snapshot(project)
    for command in (["regen", "--tag", "v0.0.1"], ["check", "--tag", "v0.0.1"]):
        result = run(project, *command, "--vllm-repo", str(vllm_repo))
        assert result.exit_code == 3
        assert "tag v0.0.1 not found" in _one_error_line(result)
    assert snapshot(project) == before


def test_check_never_passes_without_comparing(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No repo, pretend nothing is installed, index unreachable: must be exit 3, not a pass.
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    result = run(project, "check", "--source", "release")
    assert result.exit_code == 3
    assert "cannot read the package index" in _one_error_line(result)


def test_verify_fails_on_one_altered_upstream_line(project: Path, tmp_path: Path) -> None:
    altered = tmp_path / "altered.py"
    text = (project / OUTPUT).read_text()
    altered.write_text(text.replace("scheduled_timestamp = time.monotonic()", "scheduled_timestamp = time.time()", 1))
    result = run(project, "verify", str(altered))
    assert result.exit_code == 1
    assert "differs from upstream" in _one_error_line(result)
    missing = tmp_path / "missing-delta.py"  # the gate gone, upstream's own cap check left in place
    gate = [line for line in text.splitlines(keepends=True) if "# balance delta 2" in line]
    assert len(gate) == 2
    missing.write_text("".join(line for line in text.splitlines(keepends=True) if line not in gate))
    assert run(project, "verify", str(missing)).exit_code == 1


def test_bump_writes_pin_and_module_together(
    project: Path, vllm_repo: Path, upstream_pinned: UpstreamFile, upstream_older: UpstreamFile
) -> None:
    # Start from the older tag, then bump to the pinned one through the git source.
    (project / PIN_FILE).write_text(f"{upstream_older.tag}\n")
    assert run(project, "regen", "--vllm-repo", str(vllm_repo)).exit_code == 0
    assert "def schedule(self) -> SchedulerOutput:" in (project / OUTPUT).read_text()
    result = run(project, "bump", upstream_pinned.tag, "--vllm-repo", str(vllm_repo))
    assert result.exit_code == 0, result.output
    assert f"schedule@{upstream_older.tag}" in result.stdout
    assert "+def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:" in result.stdout
    assert (project / PIN_FILE).read_text() == f"{upstream_pinned.tag}\n"
    assert (project / OUTPUT).read_bytes() == (REPO_ROOT / OUTPUT).read_bytes()


def test_bump_to_a_tag_where_a_delta_fails_writes_nothing(
    project: Path, tmp_path: Path, upstream_pinned: UpstreamFile
) -> None:
    # A later "release" whose WAITING loop lost the running-cap break: delta 2 has no anchor.
    later = without_cap_check(upstream_pinned.data)
    repo_path = build_vllm_repo(tmp_path / "later", [(upstream_pinned.tag, upstream_pinned.data), ("v99.0.0", later)])
    before = snapshot(project)
    result = run(project, "bump", "v99.0.0", "--vllm-repo", str(repo_path))
    assert result.exit_code == 4
    assert "delta 2" in _one_error_line(result) and "v99.0.0" in _one_error_line(result)
    assert " | " in result.stderr and "while " in result.stderr  # the WAITING loop's numbered lines
    assert snapshot(project) == before
    matrix = run(project, "matrix", upstream_pinned.tag, "v99.0.0", "--vllm-repo", str(repo_path))
    assert matrix.exit_code == 4
    assert f"{upstream_pinned.tag:<12} ok" in matrix.stdout
    assert "v99.0.0      FAIL (DeltaDoesNotApply): delta 2" in matrix.stdout


def test_python_dash_m_generator_is_the_same_cli() -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "generator", "--help"], capture_output=True, text=True, cwd=REPO_ROOT, check=False
    )
    assert result.returncode == 0
    for command in ("regen", "check", "verify", "bump", "matrix"):
        assert command in result.stdout


def test_an_os_error_while_writing_is_one_line_and_exit_2(project: Path) -> None:
    # /proc is a real filesystem that refuses new files, even for root.
    result = run(project, "regen", "--output", "/proc/balance_scheduler.py")
    assert result.exit_code == 2
    assert "cannot access" in _one_error_line(result)

"""Every workflow in .github/workflows/ holds to the rules zizmor audits in `make lint`, read directly.

zizmor is the audit; these are the project's own rules stated as tests, so a rule survives a zizmor
version that stops checking it, and a failure names the workflow, job and step.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from balance_dev.project_files import REPO_ROOT

WORKFLOWS = sorted((REPO_ROOT / ".github/workflows").glob("*.y*ml"))
_PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _load(path: Path) -> dict[Any, Any]:
    spec: dict[Any, Any] = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as True.
    if True in spec:
        spec["on"] = spec.pop(True)
    return spec


def _steps(spec: dict[Any, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(name, step) for name, job in spec["jobs"].items() for step in job.get("steps", [])]


def test_there_are_workflows_to_check() -> None:
    assert {p.name for p in WORKFLOWS} >= {"bump.yml", "drift-gate.yml"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_least_privilege(path: Path) -> None:
    spec = _load(path)
    assert spec.get("permissions") == {}, "top level: `permissions: {}`; each job asks for what it needs"
    for name, job in spec["jobs"].items():
        assert "permissions" in job, f"job {name} has no permissions: block"
        assert "write-all" not in str(job["permissions"]) and "read-all" not in str(job["permissions"])
    assert "pull_request_target" not in spec["on"]
    assert "workflow_run" not in spec["on"]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_expression_is_interpolated_into_a_script(path: Path) -> None:
    for job, step in _steps(_load(path)):
        assert "${{" not in step.get("run", ""), f"{job}: pass it through env: and read it as a variable"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_actions_are_pinned_by_commit_and_checkouts_keep_no_credentials(path: Path) -> None:
    text = path.read_text()
    for job, step in _steps(_load(path)):
        if "uses" not in step:
            continue
        assert _PINNED.match(step["uses"]), f"{job}: {step['uses']} is not pinned to a full commit sha"
        # The version the sha was taken from, for whoever updates it (docs/installing.md).
        assert re.search(re.escape(step["uses"]) + r" # v\d+\.\d+\.\d+$", text, re.MULTILINE)
        if step["uses"].startswith("actions/checkout@"):
            assert step.get("with", {}).get("persist-credentials") is False, f"{job}: persist-credentials: false"


def test_one_version_of_each_action() -> None:
    seen: dict[str, set[str]] = {}
    for path in WORKFLOWS:
        for _, step in _steps(_load(path)):
            if "uses" in step:
                action, _, sha = step["uses"].partition("@")
                seen.setdefault(action, set()).add(sha)
    assert all(len(shas) == 1 for shas in seen.values()), seen


def test_bump_runs_daily_and_by_hand() -> None:
    spec = _load(REPO_ROOT / ".github/workflows/bump.yml")
    assert set(spec["on"]) == {"schedule", "workflow_dispatch"}
    assert len(spec["on"]["schedule"]) == 1
    minute, hour, *rest = spec["on"]["schedule"][0]["cron"].split()
    assert minute.isdigit() and hour.isdigit() and rest == ["*", "*", "*"]
    grants = {name: job["permissions"] for name, job in spec["jobs"].items()}
    assert grants == {
        "plan": {"contents": "read"},
        "pull-request": {"actions": "write", "contents": "write", "pull-requests": "write"},
        "vllm-main": {"contents": "read"},
        "issue": {"issues": "write"},
    }
    # The issue job checks nothing out and installs nothing: it only carries the plan it is handed.
    assert [s for _, s in _steps({"jobs": {"issue": spec["jobs"]["issue"]}}) if "uses" in s] == []
    # The drift gate can be started on the bump's branch (a token-made pull request starts nothing).
    assert "workflow_dispatch" in _load(REPO_ROOT / ".github/workflows/drift-gate.yml")["on"]

"""`matrix` on git refs: vLLM main (and any commit) weeks before a release, from a git source only.

The repository is real (gitpython), built from real released scheduler.py files: tags for two
releases, ``main`` moving on without breaking anything, and a branch whose commit breaks delta 2's
anchor the way a later vLLM could.
"""

from __future__ import annotations

import json
from pathlib import Path

import git
import jsonschema
import pytest

from balance_dev.cli_run import one_error_line, run
from balance_dev.project_files import REPO_ROOT, snapshot
from balance_dev.upstream_edits import without_cap_check
from balance_dev.upstream_repo import add_branch, build_vllm_repo
from generator.pins.refs import MAIN_VERIFIED_FILE
from generator.sources.base import UpstreamFile

SCHEMA = json.loads((REPO_ROOT / "generator/pins/plan.schema.json").read_text())


class Vllm:
    def __init__(self, path: Path, broken_sha: str) -> None:
        self.path = path
        self.broken_sha = broken_sha
        self.repo = git.Repo(path)

    @property
    def main_sha(self) -> str:
        return self.repo.commit("refs/heads/main").hexsha


@pytest.fixture
def vllm(tmp_path_factory: pytest.TempPathFactory, upstream_older: UpstreamFile, upstream_pinned: UpstreamFile) -> Vllm:
    path = build_vllm_repo(
        tmp_path_factory.mktemp("vllm") / "vllm",
        [(u.tag, u.data) for u in (upstream_older, upstream_pinned)],
        then=upstream_pinned.data + b"# main moves on after the release\n",
    )
    broken = add_branch(path, "refactor-admission", without_cap_check(upstream_pinned.data))
    return Vllm(path, broken)


def test_refs_print_the_same_line_as_tags_naming_the_commit(project: Path, vllm: Vllm, pinned_tag: str) -> None:
    before = snapshot(project)
    result = run(
        project, "matrix", pinned_tag, "main", "refactor-admission", vllm.broken_sha, "--vllm-repo", str(vllm.path)
    )
    assert result.exit_code == 4, result.output
    tag_line, main_line, branch_line, sha_line = result.stdout.splitlines()
    assert tag_line.startswith(f"{pinned_tag:<12} ok: ")
    # The same verdict as the tag it was cut from, on the line of the commit main was read at.
    assert main_line == tag_line.replace(f"{pinned_tag:<12}", f"main@{vllm.main_sha[:12]}", 1)
    broken = vllm.broken_sha[:12]
    assert branch_line.startswith(f"refactor-admission@{broken} FAIL (DeltaDoesNotApply): delta 2 ")
    assert f"does not apply to refactor-admission@{broken}:" in branch_line
    assert sha_line.startswith(f"{broken} FAIL (DeltaDoesNotApply): delta 2 ")
    assert snapshot(project) == before


def test_a_url_source_fetches_the_branch_tip_each_time(
    project: Path, vllm: Vllm, upstream_pinned: UpstreamFile
) -> None:
    url = vllm.path.as_uri()
    first = run(project, "matrix", "main", "--vllm-repo", url)
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith(f"main@{vllm.main_sha[:12]} ok: ")
    # main moves on to break the anchor: the cached clone must not answer with the old tip.
    (vllm.path / "vllm/v1/core/sched/scheduler.py").write_bytes(without_cap_check(upstream_pinned.data))
    vllm.repo.index.add(["vllm/v1/core/sched/scheduler.py"])
    vllm.repo.index.commit("main breaks delta 2")
    second = run(project, "matrix", "main", vllm.broken_sha, "--vllm-repo", url)
    assert second.exit_code == 4, second.output
    main_line, sha_line = second.stdout.splitlines()
    assert main_line.startswith(f"main@{vllm.main_sha[:12]} FAIL (DeltaDoesNotApply): delta 2 ")
    assert sha_line.startswith(f"{vllm.broken_sha[:12]} FAIL (DeltaDoesNotApply)")


def test_main_verified_reads_the_commit_in_its_file(project: Path, vllm: Vllm) -> None:
    (project / MAIN_VERIFIED_FILE).write_text(f"{vllm.main_sha}\n")
    ok = run(project, "matrix", "--main-verified", "--vllm-repo", str(vllm.path))
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.startswith(f"{vllm.main_sha[:12]} ok: ")
    (project / MAIN_VERIFIED_FILE).write_text(f"{vllm.broken_sha}\n")
    broken = run(project, "matrix", "--main-verified", "--vllm-repo", str(vllm.path))
    assert broken.exit_code == 4
    assert broken.stdout.startswith(f"{vllm.broken_sha[:12]} FAIL (DeltaDoesNotApply)")


def test_the_committed_main_verified_file_is_a_full_sha(tmp_path: Path) -> None:
    from generator.pins.refs import read_main_verified

    assert len(read_main_verified(REPO_ROOT / MAIN_VERIFIED_FILE)) == 40
    for bad in ("main", "e5588e49bc26", "-x", "e5588e49bc2642670116664a7fc4096e27adb17g"):
        (tmp_path / "f").write_text(bad)
        with pytest.raises(Exception, match="main-verified file"):
            read_main_verified(tmp_path / "f")


def test_plan_names_one_issue_per_ref_and_only_when_an_anchor_breaks(
    project: Path, vllm: Vllm, tmp_path_factory: pytest.TempPathFactory, upstream_pinned: UpstreamFile
) -> None:
    plans = tmp_path_factory.mktemp("plans")
    ok = run(project, "matrix", "main", "--vllm-repo", str(vllm.path), "--plan", str(plans / "ok.json"))
    assert ok.exit_code == 0, ok.output
    made = json.loads((plans / "ok.json").read_text())
    jsonschema.validate(made, SCHEMA)
    assert (made["command"], made["outcome"], made["action"], made["issue"]) == ("matrix", "ok", "none", None)

    args = ["matrix", "refactor-admission", "--vllm-repo", str(vllm.path), "--plan"]
    broken = run(project, *args, str(plans / "broken.json"))
    assert broken.exit_code == 0, broken.output  # the plan was made; the failure is its content
    made = json.loads((plans / "broken.json").read_text())
    jsonschema.validate(made, SCHEMA)
    assert (made["outcome"], made["action"], made["exit_code"]) == ("delta-does-not-apply", "issue", 4)
    assert made["failure"]["delta"] == 2 and " | " in made["failure"]["upstream_lines"]
    assert "vLLM refactor-admission:" in made["issue"]["title"]
    assert made["matrix"][0]["line"] in made["issue"]["body"]
    assert made["failure"]["upstream_lines"] in made["issue"]["body"]
    # The branch moves on (still broken): same title, so the workflow updates the issue it opened.
    later = without_cap_check(upstream_pinned.data + b"# later work on the branch\n")
    vllm.repo.git.branch("-f", "refactor-admission", add_branch(vllm.path, "next", later))
    again = run(project, *args, str(plans / "again.json"))
    assert again.exit_code == 0, again.output
    moved = json.loads((plans / "again.json").read_text())
    assert moved["issue"]["title"] == made["issue"]["title"]
    assert moved["matrix"][0]["label"] != made["matrix"][0]["label"]  # a new commit, named in the body


def test_a_ref_that_cannot_be_read_fails_the_plan_instead_of_hiding(project: Path, vllm: Vllm) -> None:
    before = snapshot(project)
    result = run(project, "matrix", "no-such-branch", "--vllm-repo", str(vllm.path), "--plan", str(project / "p.json"))
    assert result.exit_code == 3
    assert "branch no-such-branch not found" in result.stdout
    assert snapshot(project) == before


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["matrix", "main"], "main is a git branch or commit, which only a git source has"),
        (["matrix", "main", "--source", "release", "--vllm-repo", "."], "only a git source has"),
        (["matrix", "main..other"], "is neither a release tag nor a plain branch name or commit id"),
        (["matrix", "HEAD~1"], "is neither a release tag"),
        (["matrix", "--", "-main"], "is neither a release tag"),
        (["matrix", "refs/../main"], "is neither a release tag"),
        (["matrix", "main@{1}"], "is neither a release tag"),
        (["matrix", "e5588e49bc26", "--vllm-repo", "file:///nowhere"], "is abbreviated"),
        (["matrix"], "matrix needs release tags or git refs"),
    ],
)
def test_refs_are_refused_before_any_line_is_printed(project: Path, args: list[str], expected: str) -> None:
    result = run(project, *args)
    assert result.exit_code == 2, result.output
    assert expected in one_error_line(result)
    assert result.stdout == ""


@pytest.mark.parametrize("command", [["regen", "--tag"], ["check", "--tag"], ["verify", "--tag"], ["bump"]])
def test_the_pin_stays_a_release_tag(project: Path, vllm: Vllm, command: list[str]) -> None:
    before = snapshot(project)
    result = run(project, *command, "main", "--vllm-repo", str(vllm.path))
    assert result.exit_code == 2, result.output
    assert "'main' is not a plain vLLM release tag" in one_error_line(result)
    assert snapshot(project) == before

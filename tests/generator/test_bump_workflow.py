""".github/workflows/bump.yml's own scripts, run job by job against a bare repository standing in for GitHub's.

The workspace is a clone of that bare repository (what actions/checkout gives), releases come from
the local package index, vLLM's repository is a local one served by file:// URL, and ``gh`` is
balance_dev/fake_gh.py: GitHub's API is the one thing faked. Everything the jobs decide comes from
the plan; these tests check that the scripts carry it to git and "GitHub" faithfully, and that a
second day's run updates what the first opened instead of opening another.
"""

from __future__ import annotations

import json
import shlex
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import git
import pytest

from balance_dev import fake_gh
from balance_dev.package_index import publish
from balance_dev.project_files import REPO_ROOT
from balance_dev.upstream_edits import SPEC_ANCHOR, without_cap_check, without_spec_anchor
from balance_dev.upstream_repo import build_vllm_repo, set_identity
from balance_dev.workflow_run import WorkflowError, WorkflowRun, runner_env
from generator.builder import pipeline
from generator.errors import EditDoesNotApply
from generator.pins import plan
from generator.pins.pin import PIN_FILE
from generator.sources import release
from generator.sources.base import UpstreamFile

WORKFLOW = REPO_ROOT / ".github/workflows/bump.yml"
OUTPUT = Path("generated/balance_scheduler.py")
REPOSITORY = "vllm-ascend/balance"  # GITHUB_REPOSITORY: only ever handed to gh as GH_REPO
JOBS = ("plan", "pull-request", "vllm-main", "issue")
# bump.yml's judge: vLLM's own scheduler tests at the new tag (minutes; the harness has its own tests in
# test_upstream_tests.py). Stood in for by its verdict, carried into the plan by the harness's own amend_plan.
JUDGE_STEP = 'make bump-judge PLAN="$RUNNER_TEMP/plan.json"'
SUMMARY = "### vLLM's own scheduler tests (stood in for)\n"


def judge_stand_in(clean: bool) -> str:
    code = (
        "import json, os, pathlib; from balance_dev.upstream_tests.report import amend_plan; "
        "p = pathlib.Path(os.environ['RUNNER_TEMP']) / 'plan.json'; "
        f"json.loads(p.read_text())['action'] == 'pull-request' and amend_plan(p, {SUMMARY!r}, clean={clean})"
    )
    return f'PYTHONPATH="{REPO_ROOT}" "{sys.executable}" -c {shlex.quote(code)}\n'


class GitHub:
    """The remote: a bare repository, the fake gh's state, and how a day's workflow run goes."""

    def __init__(self, root: Path, project: dict[Path, bytes], vllm_url: str) -> None:
        self.root = root
        self.bare = root / "origin.git"
        self.state = root / "gh-state.json"
        self.vllm_url = vllm_url
        self.days = 0
        self.upstream_tests_clean = True
        source = git.Repo.init(root / "source", initial_branch="main")
        set_identity(source)
        for rel, data in project.items():
            (root / "source" / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / "source" / rel).write_bytes(data)
        source.index.add([str(rel) for rel in project])
        source.index.commit("the project on main")
        git.Repo.init(self.bare, bare=True, initial_branch="main")
        source.git.push(str(self.bare), "main:refs/heads/main")
        self.bin = root / "bin"
        self.bin.mkdir()
        gh = self.bin / "gh"
        gh.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO_ROOT}" exec "{sys.executable}" -m balance_dev.fake_gh "$@"\n')
        gh.chmod(gh.stat().st_mode | stat.S_IXUSR)

    @property
    def gh(self) -> dict[str, Any]:
        return fake_gh.load(self.state)

    def branch(self, name: str) -> git.Commit:
        return git.Repo(self.bare).commit(f"refs/heads/{name}")

    def day(self) -> WorkflowRun:
        """One scheduled run of the whole workflow, in a fresh checkout of main."""
        self.days += 1
        workspace = self.root / f"day-{self.days}"
        git.Repo.clone_from(str(self.bare), workspace)
        (workspace / ".venv").symlink_to(Path(sys.prefix))  # what `make regen-deps` builds
        home = self.root / f"home-{self.days}"
        home.mkdir()
        env = runner_env(home, self.bin, GITHUB_REPOSITORY=REPOSITORY, **{fake_gh.STATE_ENV: str(self.state)})
        values = {"github.token": "token-of-this-run", "github.repository": REPOSITORY, "vars.TORCH_CPU_INDEX": ""}
        run = WorkflowRun(
            WORKFLOW,
            workspace,
            env,
            values,
            overrides={"VLLM_REPO": self.vllm_url},
            stand_ins={JUDGE_STEP: judge_stand_in(self.upstream_tests_clean)},
        )
        for job in JOBS:
            run.run(job)
        return run


# vLLM main stands in as a release newer than every shipped spec's since, where they all apply (the job
# sweeps them too): main is always newer than every release.
MAIN_LIKE = "v0.32.0"


@pytest.fixture(scope="module")
def upstream_main_like() -> UpstreamFile:
    upstream, _ = release.fetch(MAIN_LIKE)
    return upstream


@pytest.fixture
def vllm_url(
    tmp_path_factory: pytest.TempPathFactory, upstream_pinned: UpstreamFile, upstream_main_like: UpstreamFile
) -> str:
    path = build_vllm_repo(
        tmp_path_factory.mktemp("vllm") / "vllm",
        [(upstream_pinned.tag, upstream_pinned.data)],
        then=upstream_main_like.data + b"# main moves on\n",
    )
    return path.as_uri()


@pytest.fixture
def new_release(
    tmp_path_factory: pytest.TempPathFactory,
    local_index: dict[str, bytes],
    upstream_older: UpstreamFile,
    upstream_pinned: UpstreamFile,
    vllm_url: str,
) -> GitHub:
    """The project pinned one release back; the index has the pinned release too: a bump is due."""
    publish(local_index, upstream_older.tag, upstream_older.data)
    publish(local_index, upstream_pinned.tag, upstream_pinned.data)
    project = {PIN_FILE: f"{upstream_older.tag}\n".encode(), OUTPUT: pipeline.generate(upstream_older).encode()}
    return GitHub(tmp_path_factory.mktemp("github"), project, vllm_url)


def test_a_new_release_arrives_as_one_pull_request_updated_not_repeated(
    new_release: GitHub, upstream_older: UpstreamFile, upstream_pinned: UpstreamFile
) -> None:
    github = new_release
    main_before = github.branch("main").hexsha
    first = github.day()
    plan = json.loads(first.jobs["plan"].outputs["plan"])
    assert plan["action"] == "pull-request" and plan["tag"] == upstream_pinned.tag
    assert [first.jobs[j].ran for j in JOBS] == [True, True, True, False]
    assert first.jobs["vllm-main"].outputs["action"] == "none"

    # The branch: one commit on main, the pin and the module of `bump --latest`, the plan's message.
    pull_request = plan["pull_request"]
    commit = github.branch(pull_request["branch"])
    assert [p.hexsha for p in commit.parents] == [main_before]
    assert commit.message == pull_request["commit_message"]
    assert (commit.tree / str(PIN_FILE)).data_stream.read() == f"{upstream_pinned.tag}\n".encode()
    assert (commit.tree / str(OUTPUT)).data_stream.read() == (REPO_ROOT / OUTPUT).read_bytes()
    assert github.branch("main").hexsha == main_before

    state = github.gh
    assert [(p["head"], p["title"], p["body"], p["state"]) for p in state["pull_requests"]] == [
        (pull_request["branch"], pull_request["title"], pull_request["body"], "OPEN")
    ]
    assert SUMMARY.rstrip() in pull_request["body"]  # the judge's summary reached the pull request
    assert state["dispatches"] == [{"workflow": "drift-gate.yml", "ref": pull_request["branch"]}]
    # Every call to GitHub carried the run's token and repository; reads of the plan needed neither.
    assert all(c["token"] == "token-of-this-run" for c in state["calls"])
    assert all(c["repo"] == REPOSITORY for c in state["calls"] if c["argv"][0] in ("pr", "issue"))
    assert state["issues"] == []

    # A maintainer adds a commit to the branch; the next day's run keeps it and updates the text.
    maintainer = git.Repo.clone_from(str(github.bare), github.root / "maintainer", branch=pull_request["branch"])
    set_identity(maintainer)
    (github.root / "maintainer" / "NOTES").write_text("adapted the runtime\n")
    maintainer.index.add(["NOTES"])
    maintainer.index.commit("maintainer's fix")
    maintainer.git.push("origin", pull_request["branch"])
    tip = github.branch(pull_request["branch"]).hexsha

    second = github.day()
    assert second.jobs["plan"].outputs["plan"] == first.jobs["plan"].outputs["plan"]  # same branch, same title
    assert github.branch(pull_request["branch"]).hexsha == tip
    state = github.gh
    assert len(state["pull_requests"]) == 1 and state["pull_requests"][0]["body"] == pull_request["body"]
    verbs = [c["argv"][:2] for c in state["calls"]]
    assert verbs.count(["pr", "create"]) == 1 and verbs.count(["pr", "edit"]) == 1

    # Closed by a maintainer: left closed, nothing new opened.
    state["pull_requests"][0]["state"] = "CLOSED"
    github.state.write_text(json.dumps(state))
    third = github.day()
    assert "is CLOSED: left as it is" in "".join(third.jobs["pull-request"].logs)
    assert len(github.gh["pull_requests"]) == 1 and github.gh["pull_requests"][0]["state"] == "CLOSED"


def test_a_release_where_a_delta_fails_and_a_broken_main_each_keep_one_issue(
    tmp_path_factory: pytest.TempPathFactory, local_index: dict[str, bytes], upstream_pinned: UpstreamFile
) -> None:
    publish(local_index, upstream_pinned.tag, upstream_pinned.data)
    publish(local_index, "v0.99.0", without_cap_check(upstream_pinned.data))
    vllm = build_vllm_repo(
        tmp_path_factory.mktemp("vllm") / "vllm",
        [(upstream_pinned.tag, upstream_pinned.data)],
        then=without_cap_check(upstream_pinned.data),
    )
    project = {PIN_FILE: f"{upstream_pinned.tag}\n".encode(), OUTPUT: (REPO_ROOT / OUTPUT).read_bytes()}
    github = GitHub(tmp_path_factory.mktemp("github"), project, vllm.as_uri())
    main_before = github.branch("main").hexsha

    first = github.day()
    assert [first.jobs[j].ran for j in JOBS] == [True, False, True, True]
    bump_plan = json.loads(first.jobs["plan"].outputs["plan"])
    main_plan = json.loads(first.jobs["vllm-main"].outputs["plan"])
    assert (bump_plan["action"], main_plan["action"]) == ("issue", "issue")
    expected = [(p["issue"]["title"], p["issue"]["body"], "OPEN") for p in (bump_plan, main_plan)]
    assert [(i["title"], i["body"], i["state"]) for i in github.gh["issues"]] == expected
    assert "v0.99.0" in expected[0][0] and "vLLM main:" in expected[1][0]
    assert github.gh["pull_requests"] == [] and github.gh["dispatches"] == []
    assert [h.name for h in git.Repo(github.bare).heads] == ["main"] and github.branch("main").hexsha == main_before

    # The next day: both issues updated in place; one a maintainer closed is reopened, not repeated.
    state = github.gh
    state["issues"][1]["state"] = "CLOSED"
    github.state.write_text(json.dumps(state))
    github.day()
    state = github.gh
    assert [(i["title"], i["state"]) for i in state["issues"]] == [(t, "OPEN") for t, _, _ in expected]
    verbs = [c["argv"][:2] for c in state["calls"]]
    assert verbs.count(["issue", "create"]) == 2
    assert verbs.count(["issue", "edit"]) == 2 and verbs.count(["issue", "reopen"]) == 1


def test_a_main_that_breaks_only_a_shipped_spec_opens_its_own_issue(
    tmp_path_factory: pytest.TempPathFactory, local_index: dict[str, bytes], upstream_pinned: UpstreamFile
) -> None:
    """A main where the balance deltas apply and a shipped spec's anchor is written another way (at any
    pin: the specs apply to the newest releases); the early warning names the spec, not a delta."""
    layout = (REPO_ROOT / "generator/tree/layouts/vllm-ascend.toml").read_text()
    assert f'anchor = "{SPEC_ANCHOR.decode()}"' in layout
    publish(local_index, upstream_pinned.tag, upstream_pinned.data)
    vllm = build_vllm_repo(
        tmp_path_factory.mktemp("vllm") / "vllm",
        [(upstream_pinned.tag, upstream_pinned.data)],
        then=without_spec_anchor(upstream_pinned.data) + b"# main moves on\n",
    )
    project = {PIN_FILE: f"{upstream_pinned.tag}\n".encode(), OUTPUT: (REPO_ROOT / OUTPUT).read_bytes()}
    github = GitHub(tmp_path_factory.mktemp("github"), project, vllm.as_uri())
    day = github.day()
    assert [day.jobs[j].ran for j in JOBS] == [True, False, True, True]
    main_plan = json.loads(day.jobs["vllm-main"].outputs["plan"])
    assert main_plan["action"] == "issue"
    assert main_plan["issue"]["title"] == plan.issue_title("main", EditDoesNotApply("x", spec="s", edit="e"))
    assert "finds an edit of a shipped spec that no longer applies" in main_plan["issue"]["body"]
    balance, *swept = main_plan["matrix"]
    assert balance["ok"] and " spec " not in balance["line"]  # the deltas themselves apply on main
    assert swept and all(" spec " in r["line"] for r in swept) and not all(r["ok"] for r in swept)
    (issue,) = github.gh["issues"]
    assert (issue["title"], issue["body"]) == (main_plan["issue"]["title"], main_plan["issue"]["body"])


def test_a_bump_whose_upstream_tests_differ_opens_an_issue_not_a_pull_request(
    new_release: GitHub, upstream_pinned: UpstreamFile
) -> None:
    new_release.upstream_tests_clean = False
    main_before = new_release.branch("main").hexsha
    day = new_release.day()
    assert [day.jobs[j].ran for j in JOBS] == [True, False, True, True]
    made = json.loads(day.jobs["plan"].outputs["plan"])
    assert (made["action"], made["outcome"]) == ("issue", "upstream-tests-differ")
    (issue,) = new_release.gh["issues"]
    assert issue["title"] == plan.upstream_tests_title(upstream_pinned.tag)
    assert SUMMARY.rstrip() in issue["body"]
    assert new_release.gh["pull_requests"] == [] and new_release.gh["dispatches"] == []
    assert [h.name for h in git.Repo(new_release.bare).heads] == ["main"]
    assert new_release.branch("main").hexsha == main_before


def test_a_failing_gh_call_fails_the_job_instead_of_opening_a_duplicate(new_release: GitHub) -> None:
    """`gh pr list` failing must not read as "no pull request yet" (bash -eo pipefail)."""
    new_release.day()
    broken = new_release.bin / "gh"
    shutil.copy2(broken, new_release.root / "gh.real")
    real = new_release.root / "gh.real"
    broken.write_text(f'#!/bin/sh\ncase "$1 $2" in "pr list") echo "HTTP 502" >&2; exit 1;; esac\nexec "{real}" "$@"\n')
    with pytest.raises(WorkflowError, match="HTTP 502"):
        new_release.day()
    assert len(new_release.gh["pull_requests"]) == 1


def test_the_workflow_reads_vllm_from_its_repository_and_only_through_the_cli() -> None:
    """What the runner above replaces is the workflow's own choice: check those values here."""
    import yaml

    spec = yaml.safe_load(WORKFLOW.read_text())
    assert spec["jobs"]["vllm-main"]["env"]["VLLM_REPO"] == "https://github.com/vllm-project/vllm.git"
    scripts = "\n".join(s.get("run", "") for job in spec["jobs"].values() for s in job["steps"])
    assert "balance-patchgen bump --latest --plan" in scripts
    assert "balance-patchgen bump --latest --no-impact\n" in scripts
    # The judge stood in for above is the Makefile's target, which runs .ci/bump-judge.
    judge = [s for s in spec["jobs"]["plan"]["steps"] if s.get("run", "").strip() == JUDGE_STEP]
    assert len(judge) == 1
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert '\n\t.ci/bump-judge "$(PLAN)"\n' in makefile
    assert "balance-patchgen matrix main --source git --specs --plan" in scripts


def test_the_judge_leaves_any_plan_but_a_pull_request_as_it_is(tmp_path: Path) -> None:
    import subprocess

    path = tmp_path / "plan.json"
    for action in ("none", "issue"):
        path.write_text(json.dumps({"action": action, "tag": "v0.99.0"}))
        before = path.read_bytes()
        done = subprocess.run([REPO_ROOT / ".ci/bump-judge", path], capture_output=True, text=True, check=False)
        assert (done.returncode, done.stdout, path.read_bytes()) == (0, "", before), done.stderr
    done = subprocess.run([REPO_ROOT / ".ci/bump-judge"], capture_output=True, text=True, check=False)
    assert done.returncode != 0 and "usage: .ci/bump-judge PLAN.json" in done.stderr

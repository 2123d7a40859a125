"""`bump --latest` and `bump --plan`: which release, and the plan automation acts on.

Releases come from the local package index (real released scheduler.py files in wheels built here),
configured the way pip is; a "later release" whose anchor is gone is a real file with its running-cap
check taken out.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from balance_dev.cli_run import one_error_line, run
from balance_dev.package_index import publish
from balance_dev.project_files import REPO_ROOT, snapshot
from balance_dev.upstream_edits import without_cap_check
from generator.builder import pipeline
from generator.pins import plan
from generator.pins.pin import PIN_FILE
from generator.sources.base import UpstreamFile

OUTPUT = Path("generated/balance_scheduler.py")
SCHEMA = json.loads((REPO_ROOT / "generator/pins/plan.schema.json").read_text())
BROKEN_TAG = "v0.99.0"


def read_plan(path: Path) -> dict[str, object]:
    made: dict[str, object] = json.loads(path.read_text())
    jsonschema.validate(made, SCHEMA)
    return made


@pytest.fixture
def plans(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where plans go: outside the project (the ``project`` fixture is the test's tmp_path)."""
    return tmp_path_factory.mktemp("plans")


@pytest.fixture
def older_project(project: Path, upstream_older: UpstreamFile) -> Path:
    """The project pinned one release back (its module generated for it): the pinned release is newer."""
    (project / PIN_FILE).write_text(f"{upstream_older.tag}\n")
    (project / OUTPUT).write_text(pipeline.generate(upstream_older), encoding="utf-8")
    return project


@pytest.fixture
def two_releases(
    local_index: dict[str, bytes], upstream_older: UpstreamFile, upstream_pinned: UpstreamFile
) -> dict[str, bytes]:
    publish(local_index, upstream_older.tag, upstream_older.data)
    publish(local_index, upstream_pinned.tag, upstream_pinned.data)
    # Not final releases: --latest never picks them, however new.
    local_index["vllm-99.1.0rc1-cp38-abi3-manylinux_2_28_x86_64.whl"] = b"never read"
    local_index["vllm-99.1.0.dev3-cp38-abi3-manylinux_2_28_x86_64.whl"] = b"never read"
    return local_index


@pytest.fixture
def broken_release(local_index: dict[str, bytes], upstream_pinned: UpstreamFile) -> dict[str, bytes]:
    """The pinned release, then a later one whose WAITING loop lost the running-cap check."""
    publish(local_index, upstream_pinned.tag, upstream_pinned.data)
    publish(local_index, BROKEN_TAG, without_cap_check(upstream_pinned.data))
    return local_index


# --- bump --latest ------------------------------------------------------------------------------


@pytest.mark.usefixtures("two_releases")
def test_latest_at_the_newest_release_says_so_in_one_line_and_writes_nothing(project: Path, pinned_tag: str) -> None:
    before = snapshot(project)
    result = run(project, "bump", "--latest")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{pinned_tag} is the newest vLLM release on the package index: nothing to do"
    ]
    assert snapshot(project) == before


@pytest.mark.usefixtures("two_releases")
def test_latest_is_exactly_bump_to_the_newest_final_release(
    older_project: Path,
    tmp_path_factory: pytest.TempPathFactory,
    upstream_older: UpstreamFile,
    upstream_pinned: UpstreamFile,
) -> None:
    twin = tmp_path_factory.mktemp("twin")
    for rel in (PIN_FILE, OUTPUT):
        (twin / rel).parent.mkdir(parents=True, exist_ok=True)
        (twin / rel).write_bytes((older_project / rel).read_bytes())

    latest = run(older_project, "bump", "--latest")
    assert latest.exit_code == 0, latest.output
    first, *rest = latest.stdout.splitlines()
    assert first == (
        f"the newest vLLM release on the package index is {upstream_pinned.tag} (pinned: {upstream_older.tag})"
    )
    assert "+def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:" in rest
    assert (older_project / PIN_FILE).read_text() == f"{upstream_pinned.tag}\n"
    assert (older_project / OUTPUT).read_bytes() == (REPO_ROOT / OUTPUT).read_bytes()

    named = run(twin, "bump", upstream_pinned.tag)
    assert named.exit_code == 0, named.output
    assert named.stdout.splitlines() == rest
    assert snapshot(twin) == snapshot(older_project)


@pytest.mark.usefixtures("broken_release")
def test_latest_where_a_delta_no_longer_applies_exits_4_and_writes_nothing(project: Path) -> None:
    before = snapshot(project)
    result = run(project, "bump", "--latest")
    assert result.exit_code == 4
    line = one_error_line(result)
    assert "delta 2" in line and BROKEN_TAG in line
    assert " | " in result.stderr and "while " in result.stderr  # the WAITING loop's numbered lines
    assert snapshot(project) == before


def test_latest_with_the_index_unreachable_is_exit_3(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    before = snapshot(project)
    result = run(project, "bump", "--latest", "--plan", str(project / "plan.json"))
    assert result.exit_code == 3
    assert "cannot read the package index" in one_error_line(result)
    assert snapshot(project) == before  # no plan either


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["bump", "v0.24.0", "--latest"], "pass NEW_TAG or --latest, not both"),
        (["bump"], "Missing argument 'NEW_TAG'"),
        (["bump", "main"], "NEW_TAG 'main' is not a plain vLLM release tag"),
        (["bump", "--latest", "--plan", ".github/vllm-release-tag.commit"], "is the pin file"),
        (["bump", "--latest", "--plan", "generated/balance_scheduler.py"], "is the generated module"),
        (["bump", "--latest", "--plan", "no/such/folder/plan.json"], "does not exist"),
    ],
)
def test_bump_usage_errors_are_exit_2_and_write_nothing(
    project: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], expected: str
) -> None:
    monkeypatch.chdir(project)  # --plan is a path as given, like seam --output
    before = snapshot(project)
    result = run(project, *args)
    assert result.exit_code == 2, result.output
    assert expected in one_error_line(result)
    assert snapshot(project) == before


# --- bump --plan ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("two_releases")
def test_plan_for_a_new_release_touches_nothing_and_describes_the_pull_request(
    older_project: Path, plans: Path, upstream_older: UpstreamFile, upstream_pinned: UpstreamFile
) -> None:
    before = snapshot(older_project)
    path = plans / "plan.json"
    result = run(older_project, "bump", "--latest", "--plan", str(path))
    assert result.exit_code == 0, result.output
    assert snapshot(older_project) == before
    made = read_plan(path)
    old, new = upstream_older.tag, upstream_pinned.tag
    assert (made["command"], made["pinned"], made["tag"]) == ("bump", old, new)
    assert (made["outcome"], made["action"], made["exit_code"]) == ("bumped", "pull-request", 0)
    assert made["failure"] is None and made["issue"] is None
    pull_request = made["pull_request"]
    assert isinstance(pull_request, dict)
    assert pull_request["branch"] == f"balance-patchgen/vllm-{new}"
    assert new in pull_request["title"] and old not in pull_request["title"]
    assert new in pull_request["commit_message"].splitlines()[0]
    body = pull_request["body"]
    # upstream's own schedule() diff, the matrix line per release since the pin, each delta at the tag
    assert "+def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:" in body
    assert [row["label"] for row in made["matrix"]] == [old, new]  # type: ignore[index, union-attr]
    for row in made["matrix"]:  # type: ignore[union-attr]
        assert row["ok"] and row["line"] in body  # type: ignore[index]
    # What each delta did, in the words of the module this bump writes (its header lists them).
    header = (REPO_ROOT / OUTPUT).read_text().split("\n\n", 1)[0]
    assert [d["number"] for d in made["deltas"]] == [1, 2, 3]  # type: ignore[index, union-attr]
    for delta in made["deltas"]:  # type: ignore[union-attr]
        assert f"delta {delta['number']}: {delta['title']}" in header  # type: ignore[index]
        assert f"delta {delta['number']}: {delta['title']}" in body  # type: ignore[index]
        for detail in delta["details"]:  # type: ignore[index]
            assert detail in header and detail in body
    assert "super().schedule(throttle_prefills)" in body

    again = plans / "again.json"
    assert run(older_project, "bump", "--latest", "--plan", str(again)).exit_code == 0
    assert again.read_bytes() == path.read_bytes()  # same findings, same bytes: same branch and title


@pytest.mark.usefixtures("broken_release")
def test_plan_for_a_release_where_a_delta_fails_describes_one_issue(
    project: Path, plans: Path, pinned_tag: str
) -> None:
    before = snapshot(project)
    path = plans / "plan.json"
    result = run(project, "bump", "--latest", "--plan", str(path))
    assert result.exit_code == 0, result.output  # the plan was made: the failure is its content
    assert snapshot(project) == before
    made = read_plan(path)
    assert (made["tag"], made["outcome"], made["action"], made["exit_code"]) == (
        BROKEN_TAG,
        "delta-does-not-apply",
        "issue",
        4,
    )
    failure = made["failure"]
    assert isinstance(failure, dict)
    assert (failure["error"], failure["delta"]) == ("DeltaDoesNotApply", 2)
    assert failure["message"].startswith("delta 2 (") and BROKEN_TAG in failure["message"]
    assert " | " in failure["upstream_lines"] and "while " in failure["upstream_lines"]
    issue = made["issue"]
    assert isinstance(issue, dict) and made["pull_request"] is None
    assert BROKEN_TAG in issue["title"]
    assert failure["message"] in issue["body"] and failure["upstream_lines"] in issue["body"]
    assert [(r["label"], r["ok"]) for r in made["matrix"]] == [(pinned_tag, True), (BROKEN_TAG, False)]  # type: ignore[index, union-attr]
    # The bump's own words on stderr are the plan's: `bump --latest` prints the same failure.
    bumped = run(project, "bump", "--latest")
    assert failure["message"] in one_error_line(bumped)


@pytest.mark.usefixtures("two_releases")
def test_plan_at_the_newest_release_is_nothing_to_do(project: Path, plans: Path, pinned_tag: str) -> None:
    path = plans / "plan.json"
    result = run(project, "bump", "--latest", "--plan", str(path))
    assert result.exit_code == 0, result.output
    made = read_plan(path)
    assert (made["pinned"], made["tag"], made["outcome"], made["action"]) == (pinned_tag, None, "up-to-date", "none")
    assert made["pull_request"] is None and made["issue"] is None


def test_schema_refuses_a_plan_that_contradicts_itself() -> None:
    """The schema is a contract, not a description: it must reject what a reader could misread."""
    good = plan.up_to_date("v0.24.0")
    jsonschema.validate(good, SCHEMA)
    for broken in (
        {**good, "schema_version": 2},
        {**good, "action": "pull-request"},  # a pull request without one
        {**good, "tag": "main"},
        {**good, "unknown": 1},
        {**good, "exit_code": 4},  # action none with a failure's code
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, SCHEMA)


# --- the body as GitHub takes it ------------------------------------------------------------------


def test_a_huge_diff_is_cut_to_fit_github_and_says_so() -> None:
    diff = "".join(f"+    line {n} of a very long upstream change {'x' * 60}\n" for n in range(5000))
    made = plan.bumped("v0.24.0", "v0.25.0", method_diff=diff, outcomes=(), no_copy_reason=None, rows=())
    body = made["pull_request"]["body"]
    assert len(body) <= 65536
    assert len(diff) > 65536 > plan.BODY_LIMIT
    assert "more lines: `balance-patchgen bump v0.25.0` in a checkout prints the whole diff" in body
    assert body.count("```") % 2 == 0
    jsonschema.validate(made, SCHEMA)


def test_backticks_in_upstream_text_cannot_close_the_code_block() -> None:
    diff = "+    # a comment quoting ``` and ```` in upstream\n"
    body = plan.bumped("v0.24.0", "v0.25.0", method_diff=diff, outcomes=(), no_copy_reason=None, rows=())[
        "pull_request"
    ]["body"]
    opening = next(line for line in body.splitlines() if line.endswith("diff"))
    assert opening == "`````diff"
    assert f"{opening}\n{diff}`````" in body


def test_plan_for_a_release_without_schedule_describes_one_issue(
    project: Path, plans: Path, local_index: dict[str, bytes], upstream_pinned: UpstreamFile
) -> None:
    # Upstream renamed the method: there is no schedule() to diff or patch, which is an issue to open
    # (matrix files it as one), not a crash of the plan step.
    publish(local_index, upstream_pinned.tag, upstream_pinned.data)
    publish(local_index, BROKEN_TAG, upstream_pinned.data.replace(b"def schedule(", b"def schedule_step("))
    before = snapshot(project)
    path = plans / "plan.json"
    result = run(project, "bump", "--latest", "--plan", str(path))
    assert result.exit_code == 0, result.output
    assert snapshot(project) == before
    made = read_plan(path)
    assert (made["tag"], made["action"], made["exit_code"]) == (BROKEN_TAG, "issue", 4)
    failure = made["failure"]
    assert isinstance(failure, dict)
    assert (failure["error"], failure["delta"]) == ("UpstreamShapeError", None)
    bumped = run(project, "bump", "--latest")
    assert bumped.exit_code == 4
    assert failure["message"] in one_error_line(bumped)


def test_upstreams_own_tests_judge_the_bump_a_difference_makes_an_issue_instead() -> None:
    made = plan.bumped("v0.24.0", "v0.25.0", method_diff="-a\n+b\n", outcomes=(), no_copy_reason=None, rows=())
    summary = "### vLLM's own scheduler tests at v0.25.0\n\n| run | passed |\n"
    clean = plan.judged(made, summary, clean=True)
    jsonschema.validate(clean, SCHEMA)
    body = clean["pull_request"]["body"]
    assert body.index(summary.rstrip()) < body.index(plan.DIFF_SECTION)
    assert {k: v for k, v in clean.items() if k != "pull_request"} == {
        k: v for k, v in made.items() if k != "pull_request"
    }
    held = plan.judged(made, summary, clean=False)
    jsonschema.validate(held, SCHEMA)
    assert (held["action"], held["outcome"], held["pull_request"], held["exit_code"]) == (
        "issue",
        "upstream-tests-differ",
        None,
        0,
    )
    assert (
        held["issue"]["title"] == "balance-patchgen: vLLM v0.25.0: its own scheduler tests differ on the generated copy"
    )
    assert summary.rstrip() in held["issue"]["body"] and "+b" in held["issue"]["body"]
    # Only a pull request is judged; a held plan cannot pass for a delta failure.
    with pytest.raises(ValueError, match="only a plan for a pull request"):
        plan.judged(held, summary, clean=True)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**held, "exit_code": 4}, SCHEMA)

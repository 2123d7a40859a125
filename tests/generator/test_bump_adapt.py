"""``bump --adapt``: the pin, the regenerated copies and adapt's files in one all-or-nothing write.

The releases and the plugin tree are ``tests/generator/adapt_trees.py``'s (the expected files after adapt
are written out there by hand), with, here, upstream's scheduler.py at each release and a copy of its
``Scheduler.schedule`` the tree declares (``balance-patchgen.toml``), which the bump regenerates.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from balance_dev.project_files import REPO_ROOT
from generator.cli import main
from generator.pins import plan
from generator.sources.base import UPSTREAM_PATH
from tests.generator.adapt_trees import (
    AFTER_COPIES,
    AFTER_USE,
    COPIES,
    RELEASE_B,
    TEST_USE,
    publish_releases,
    snapshot,
    write_files,
    write_plugin,
)

SCHEMA = json.loads((REPO_ROOT / "generator/pins/plan.schema.json").read_text())
PIN = ".github/vllm-release-tag.commit"

SCHEDULER_A = """\
class Scheduler:
    def schedule(self):
        out = []
        for request in self.waiting:
            if len(out) >= self.cap:
                break
            out.append(request)
        self.scheduled = out
        return out
"""
SCHEDULER_B = SCHEDULER_A.replace("self.cap", "self.max_reqs")
UPSTREAM = {"vllm/v1/__init__.py": "", "vllm/v1/core/__init__.py": "", "vllm/v1/core/sched/__init__.py": ""}

SPEC = '''
[[copy]]
name = "mine"
upstream = "vllm/v1/core/sched/scheduler.py:Scheduler.schedule"
destination = "pkg/sched.py:MyScheduler.schedule"

[[copy.edit]]
name = "count"
anchor = "self.scheduled = out"
after = """
self.count = len(out)  # counted by MyScheduler
"""
'''
SCHED = """\
from vllm.v1.core.sched.scheduler import Scheduler


class MyScheduler(Scheduler):
    def schedule(self):
        raise NotImplementedError("replaced by balance-patchgen regen")
"""


def _cli(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--root", str(root), *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def tree(tmp_path: Path, local_index: dict[str, bytes]) -> Path:
    publish_releases(
        local_index, a={**UPSTREAM, UPSTREAM_PATH: SCHEDULER_A}, b={**UPSTREAM, UPSTREAM_PATH: SCHEDULER_B}
    )
    root = write_plugin(tmp_path / "plugin")
    write_files(root, {PIN: "v1.0.0\n", "balance-patchgen.toml": SPEC, "pkg/sched.py": SCHED})
    code, _, err = _cli(root, "regen")  # the declared copy in place at A, as a tree keeps it
    assert code == 0, err
    return root


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error:" in line]


def _regenerated_at_b(text: str) -> bool:
    """The declared copy is B's function plus the spec's edit (its words, written above), in its markers."""
    return (
        "is vLLM v1.1.0's Scheduler.schedule plus the edits below" in text
        and "            if len(out) >= self.max_reqs:\n" in text
        and "        self.scheduled = out\n        self.count = len(out)  # counted by MyScheduler\n" in text
    )


def test_bump_adapt_moves_the_pin_regenerates_the_copy_and_writes_adapts_files_together(tree: Path) -> None:
    code, out, err = _cli(tree, "bump", "v1.1.0", "--adapt", "--no-impact")
    # The pin and the mechanical part moved; the conflicting copy is a person's: exit 1, one line.
    assert code == 1, err
    (line,) = _error_lines(err)
    assert "adapt v1.0.0 -> v1.1.0 wrote what it could and left 1 for a person (1 conflict;" in line
    assert (tree / PIN).read_text() == "v1.1.0\n"
    assert _regenerated_at_b((tree / "pkg/sched.py").read_text())
    assert (tree / "pkg/use.py").read_text() == AFTER_USE
    assert (tree / "pkg/copies.py").read_text() == AFTER_COPIES  # pick re-synced, the conflict byte for byte
    assert "left -= 2  # plugin: two at a time" in AFTER_COPIES
    assert (tree / "tests/test_use.py").read_text() == TEST_USE.replace(
        "vllm.sched.util.Helper", "vllm.core.helper.Helper"
    )
    assert "pinned v1.1.0 and regenerated 1 copies" in out
    assert "left conflict pkg/copies.py:18 vllm.sched.scheduler.Scheduler.schedule" in out
    # The copy the bump regenerates is the generator's: adapt does not merge it too (census finds it a copy).
    assert "pkg/sched.py" not in out.split("adapt v1.0.0 -> v1.1.0", 1)[1]
    code, _, err = _cli(tree, "check")
    assert code == 0, err  # the regenerated region is exactly what the generator makes at the new pin


def test_a_file_holding_the_regenerated_copy_gets_both_the_copy_and_adapts_rename(tree: Path) -> None:
    sched = tree / "pkg/sched.py"
    sched.write_text("from vllm.sched.util import Helper  # moved at B\n" + sched.read_text())
    code, _, err = _cli(tree, "bump", "v1.1.0", "--adapt", "--no-impact")
    assert code == 1, err  # the other file's conflict
    text = sched.read_text()
    assert text.startswith("from vllm.core.helper import Helper  # moved at B\n")
    assert _regenerated_at_b(text)
    code, _, err = _cli(tree, "check")
    assert code == 0, err


def test_bump_adapt_with_nothing_left_for_a_person_exits_0(tree: Path) -> None:
    # The plugin's copy of Scheduler.schedule without its own edit: it merges (B's), nothing is left.
    (tree / "pkg/copies.py").write_text(COPIES.replace("left -= 2  # plugin: two at a time", "left -= 1"))
    code, out, err = _cli(tree, "bump", "v1.1.0", "--adapt", "--no-impact")
    assert code == 0 and not _error_lines(err), err
    assert (tree / PIN).read_text() == "v1.1.0\n"
    assert "left -= self.stride" in (tree / "pkg/copies.py").read_text()
    assert "0 left (0 for a person)" in out


def test_a_failure_while_writing_leaves_every_file_and_the_pin_as_they_were(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(tree)
    real = os.replace

    def failing(src: str, dst: str) -> None:
        # The pin goes last: every other file (the regenerated copy and adapt's three) is in place by then.
        if str(dst).endswith(PIN):
            raise OSError(28, "No space left on device", dst)
        real(src, dst)

    monkeypatch.setattr(os, "replace", failing)
    code, _, err = _cli(tree, "bump", "v1.1.0", "--adapt", "--no-impact")
    monkeypatch.setattr(os, "replace", real)
    assert code == 2 and "no space left" in err
    assert snapshot(tree) == before


def test_a_spec_edit_that_no_longer_applies_writes_nothing_adapt_included(
    tree: Path, local_index: dict[str, bytes]
) -> None:
    gone = SCHEDULER_B.replace("self.scheduled = out", "self.last = out")
    publish_releases(local_index, a={**UPSTREAM, UPSTREAM_PATH: SCHEDULER_A}, b={**UPSTREAM, UPSTREAM_PATH: gone})
    before = snapshot(tree)
    code, _, err = _cli(tree, "bump", "v1.1.0", "--adapt", "--no-impact")
    assert code == 4 and "count" in _error_lines(err)[0]
    assert snapshot(tree) == before


def test_plan_with_adapt_carries_its_diff_and_what_is_left(tree: Path, tmp_path: Path) -> None:
    before = snapshot(tree)
    path = tmp_path / "plan.json"
    code, _, err = _cli(tree, "bump", "v1.1.0", "--adapt", "--no-impact", "--plan", str(path))
    assert code == 0, err  # the plan was made: what the bump would exit with is its content
    assert snapshot(tree) == before
    made = json.loads(path.read_text())
    jsonschema.validate(made, SCHEMA)
    assert (made["outcome"], made["action"], made["exit_code"]) == ("bumped", "pull-request", 1)
    adapt = made["adapt"]
    counts = {"files": 3, "renamed": 3, "merged": 1, "followed": 0, "gates_written": 0, "gates_retired": 0}
    assert adapt["counts"] == {**counts, "left": 1, "work": 1, "skipped": 1}
    assert adapt["files"] == ["pkg/copies.py", "pkg/use.py", "tests/test_use.py"]
    # The diff is what the real run writes into adapt's files, in the words of the texts written here.
    for rel in adapt["files"]:
        assert f"+++ b/{rel}\n" in adapt["diff"]
    assert "-from vllm.sched.util import Helper as H, pick  # both from util at A\n" in adapt["diff"]
    assert "+from vllm.core.helper import Helper as H\n" in adapt["diff"]
    assert "+    out.sort(key=lambda r: r.priority)\n" in adapt["diff"]
    assert "pkg/sched.py" not in adapt["diff"]  # the regenerated copy is the bump's, not adapt's
    (conflict,) = [x for x in adapt["left"] if x["work"]]
    assert (conflict["kind"], conflict["site"], conflict["verdict"]) == ("conflict", "pkg/copies.py:18", "review")
    assert "left -= self.stride" in conflict["detail"]
    body = made["pull_request"]["body"]
    assert "<details><summary>the diff adapt writes" in body and "+from vllm.core.helper import Helper as H" in body
    assert "**to do** conflict `pkg/copies.py:18`" in body
    assert "adapt left 1 for a person" in made["summary"]
    assert "--adapt" in made["pull_request"]["commit_message"]

    plain = tmp_path / "plain.json"
    assert _cli(tree, "bump", "v1.1.0", "--no-impact", "--plan", str(plain))[0] == 0
    without = json.loads(plain.read_text())
    jsonschema.validate(without, SCHEMA)
    assert (without["adapt"], without["exit_code"]) == (None, 0)
    # The schema holds the code to the work: 1 without work left, or 0 with it, is refused.
    for contradiction in ({**without, "exit_code": 1}, {**made, "exit_code": 0}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(contradiction, SCHEMA)


def test_a_huge_adapt_diff_is_cut_in_the_body_and_whole_in_the_plan() -> None:
    from generator.cli.pins import ADAPT_BODY_LIMIT
    from generator.tree.adapt import report
    from generator.tree.adapt.plan import Plan

    diff = "".join(f"+    line {n} of a very long rewrite {'x' * 60}\n" for n in range(5000))
    made_adapt = Plan("v1.0.0", "v1.1.0")
    section = report.markdown(made_adapt, diff, limit=ADAPT_BODY_LIMIT)
    made = plan.bumped(
        "v1.0.0",
        "v1.1.0",
        method_diff=diff,
        outcomes=(),
        no_copy_reason=None,
        rows=(),
        adapt=report.to_json(made_adapt, diff),
        adapt_markdown=section,
    )
    body = made["pull_request"]["body"]
    assert len(diff) > 65536 and len(body) <= 65536 and len(section) <= ADAPT_BODY_LIMIT
    assert "the whole diff is the plan's `adapt.diff` field" in section and section in body
    assert body.count("```") % 2 == 0 and body.count("<details>") == body.count("</details>") == 1
    assert made["adapt"]["diff"] == diff
    jsonschema.validate(made, SCHEMA)


def test_a_plan_with_results_carries_their_failures_explained(tree: Path, tmp_path: Path) -> None:
    """``bump --plan --results``: the tree's own test run at B (real pytest, its JUnit XML) explained in the plan
    and its body; the test that fails is the one whose mock.patch string names the path Helper left."""
    site = write_files(tmp_path / "b-site", {**RELEASE_B, **UPSTREAM, UPSTREAM_PATH: SCHEDULER_B})
    xml = tmp_path / "at-b.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", "tests"],
        cwd=tree,
        env={"PYTHONPATH": f"{tree}:{site}", "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        capture_output=True,
        check=False,
    )
    before = snapshot(tree)
    path = tmp_path / "plan.json"
    code, _, err = _cli(tree, "bump", "v1.1.0", "--no-impact", "--plan", str(path), "--results", str(xml))
    assert code == 0, err
    assert snapshot(tree) == before
    made = json.loads(path.read_text())
    jsonschema.validate(made, SCHEMA)
    explain_schema = json.loads((REPO_ROOT / "generator/judge/explain/explain.schema.json").read_text())
    jsonschema.validate(made["explain"], explain_schema)
    assert made["explain"]["failures"] == 1
    (group,) = made["explain"]["groups"]
    assert group["test_ids"] == ["tests/test_use.py::test_run"]
    assert any(h["upstream"] == "vllm.sched.util.Helper.run" for h in group["couplings"]), group
    assert "### What the bump's failures hit" in made["pull_request"]["body"]
    code, _, err = _cli(tree, "bump", "v1.1.0", "--results", str(xml))
    assert code == 2 and "--results goes with --plan" in err
    assert snapshot(tree) == before

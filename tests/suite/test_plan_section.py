"""The suite report as a section of the bump's pull request (`--amend-plan`), written from a report the test
writes by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from balance_dev import plan_amend
from balance_dev.suite import cli, results
from generator.pins import plan as plans


def report() -> dict[str, object]:
    counts = {"collected": 10, "passed": 9, "failed": 1, "errors": 0, "skipped": 0, "seconds": 12}
    return {
        "tree": "plugin 1.0",
        "from": "v0.1.0",
        "to": "v0.2.0",
        "command": ".venv/bin/python -m balance_dev.suite --version 1.0 --to v0.2.0",
        "at_from": counts,
        "at_to": {**counts, "passed": 2, "failed": 5, "errors": 3, "seconds": 7},
        "bump_failures": 7,
        "by_verdict": {"breaks": 6, "review": 0, "info": 0, "unjudged": 0, "nothing": 1},
        "breaks_couplings": 4,
        "breaks_executed_at_from": 3,
        "breaks_executed_failing_at_to": 2,
        "theirs": [{"test": "t::own", "outcome": "failed", "error": "AssertionError"}],
        "failure_groups": [
            {
                "tests": 6,
                "error": "ImportError: cannot import name 'Gone' from 'vllm.a' | with a pipe",
                "couplings": [
                    {"site": "p/x.py:3", "upstream": "vllm.a.Gone", "verdict": "breaks", "status": "removed"}
                ],
            },
            {"tests": 1, "error": "ZeroDivisionError: division by zero", "couplings": []},
        ],
    }


def test_the_section_has_both_releases_counts_the_verdicts_and_each_failure_group() -> None:
    text = results.markdown(report())
    assert "| v0.1.0 | 10 | 9 | 1 | 0 | 0 | 12 |" in text
    assert "| v0.2.0 | 10 | 2 | 5 | 3 | 0 | 7 |" in text
    assert "**7 bump failures**" in text and "breaks 6, review 0, info 0, unjudged 0, nothing 1" in text
    assert "Of 4 `breaks` couplings, 3 have a site their tests execute at v0.1.0; a failure at v0.2.0 hits 2." in text
    assert "Failing at v0.1.0 already (the tree's own, not counted): 1." in text
    error = "ImportError: cannot import name 'Gone' from 'vllm.a' \\| with a pipe"
    assert f"| 6 | {error} | `p/x.py:3` `vllm.a.Gone` (breaks, removed) |" in text
    assert "| 1 | ZeroDivisionError: division by zero | none: the tool is blind |" in text


def test_the_plan_carries_it_before_upstreams_diff_and_a_bad_plan_is_left_as_it_was(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    body = f"the bump\n\n{plans.DIFF_SECTION} from v0.1.0 to v0.2.0\n\n```diff\n-a\n+b\n```"
    plan.write_text(json.dumps({"action": "pull-request", "tag": "v0.2.0", "pull_request": {"body": body}}))
    section = results.markdown(report())
    plan_amend.amend(plan, section)
    amended = json.loads(plan.read_text())["pull_request"]["body"]
    assert amended == body.replace(plans.DIFF_SECTION, section.rstrip("\n") + "\n\n" + plans.DIFF_SECTION)
    issue = json.dumps({"action": "issue", "issue": {"body": "x"}})
    plan.write_text(issue)
    with pytest.raises(plan_amend.PlanAmendError, match=r"no pull_request\.body"):
        plan_amend.amend(plan, section)
    assert plan.read_text() == issue


def test_the_rerun_command_makes_the_report_and_amends_no_plan() -> None:
    argv = ["--version", "1.0", "--reuse-runs", "--amend-plan", "p.json", "--to", "v0.2.0", "--amend-plan=q.json"]
    assert cli.rerun_command(argv) == ".venv/bin/python -m balance_dev.suite --version 1.0 --to v0.2.0"

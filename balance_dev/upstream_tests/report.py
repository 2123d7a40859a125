"""The report of a harness run: the table printed, the markdown for a pull request body, the bump plan amended.

``summary`` is what ``make upstream-tests`` prints; ``markdown`` the same table for the bump's pull request
(``--markdown``, ``--amend-plan``); ``amend_plan`` carries the verdict into a ``bump --plan`` plan
(``generator.pins.plan.judged``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from balance_dev import plan_amend
from balance_dev.upstream_tests import sdist
from balance_dev.upstream_tests.runs import CONTROL_TIMEOUT_S, HarnessError, Result, Setup
from generator.pins import plan as plans
from generator.tags import version_of


def summary_rows(results: Sequence[Result], verdict: Mapping[str, Sequence[str]]) -> list[str]:
    head = f"{'run':<14} {'passed':>6} {'failed':>6} {'errors':>6} {'skipped':>7} {'calls':>7} {'time':>5}  verdict"
    rows = [head]
    for r in results:
        if r.problem:
            rows.append(f"{r.spec.label:<14} {'-':>6} {'-':>6} {'-':>6} {'-':>7} {'-':>7} {r.seconds:>4.0f}s  NOT RUN")
            continue
        counts = (r.count("passed"), r.count("failed"), r.count("error"), r.count("skipped"))
        rows.append(
            f"{r.spec.label:<14} {counts[0]:>6} {counts[1]:>6} {counts[2]:>6} {counts[3]:>7} {r.calls():>7} "
            f"{r.seconds:>4.0f}s  {verdict_word(r, verdict)}"
        )
    return rows


def verdict_word(r: Result, verdict: Mapping[str, Sequence[str]]) -> str:
    bad = bool(verdict.get(r.spec.label))
    if r.spec.role == "reference":
        return "reference: PROBLEM" if bad else "reference"
    if r.spec.role == "control":
        return "DID NOT BREAK" if bad else f"broke {r.count('failed') + r.count('error')} tests, admitted 0 (control)"
    return "DIFFERS" if bad else "same outcomes and outputs as upstream"


def summary(setup: Setup, results: Sequence[Result], verdict: Mapping[str, Sequence[str]]) -> str:
    lines = [
        f"vLLM {setup.tag}'s own tests ({', '.join(setup.tests)}, from {sdist.sdist_name(version_of(setup.tag))}, "
        f"byte-identical), per-test timeout {setup.timeout} s ({CONTROL_TIMEOUT_S} s in the controls)",
        *summary_rows(results, verdict),
    ]
    for r in results:
        lines += [f"  {r.spec.label}: {p}" for p in verdict.get(r.spec.label, [])[:20]]
        if len(verdict.get(r.spec.label, [])) > 20:
            lines.append(f"  {r.spec.label}: ... {len(verdict[r.spec.label]) - 20} more (see {setup.work}/report.json)")
    return "\n".join(lines)


MARKDOWN_PROBLEMS = 12  # lines of problems in the markdown summary: it goes into a pull request body


def markdown(setup: Setup, results: Sequence[Result], verdict: Mapping[str, Sequence[str]]) -> str:
    clean = not any(verdict.values())
    lines = [
        f"### vLLM {setup.tag}'s own scheduler tests on the new copy",
        "",
        f"`make upstream-tests`: {', '.join(f'`{t}`' for t in setup.tests)} from vLLM's sdist "
        f"(`{sdist.sdist_name(version_of(setup.tag))}`, byte-identical), each run in its own process, every "
        "`schedule()` output compared with upstream's. "
        + ("**Clean.**" if clean else "**Not clean: this bump must not merge as it is.**"),
        "",
        "| run | what | passed | failed | errors | `schedule()` calls | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.problem:
            lines.append(f"| {r.spec.label} | {r.spec.what} | - | - | - | - | not run: {r.problem[:120]} |")
            continue
        lines.append(
            f"| {r.spec.label} | {r.spec.what} | {r.count('passed')} | {r.count('failed')} | {r.count('error')} | "
            f"{r.calls()} | {verdict_word(r, verdict)} |"
        )
    problems = [f"- {label}: {p[:300]}" for label, ps in verdict.items() for p in ps]
    if problems:
        more = [f"- ... {len(problems) - MARKDOWN_PROBLEMS} more: `make upstream-tests` prints them all"]
        lines += ["", *problems[:MARKDOWN_PROBLEMS], *(more if len(problems) > MARKDOWN_PROBLEMS else [])]
    lines += ["", *(f"- {note}" for note in setup.notes)]
    return "\n".join(lines) + "\n"


PLAN_BODY_MAX = plans.GITHUB_BODY_MAX


def amend_plan(plan_path: Path, text: str, *, clean: bool = True) -> None:
    """The bump plan judged by this run (``balance_dev.plan_amend``): clean, ``text`` goes into its pull
    request's body before upstream's ``schedule()`` diff; not clean, the plan becomes an issue instead."""
    try:
        plan_amend.amend(plan_path, text, clean=clean)
    except plan_amend.PlanAmendError as exc:
        raise HarnessError(str(exc), 2) from exc

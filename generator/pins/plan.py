"""What automation should do after ``bump --plan`` or ``matrix --plan``, as JSON (``plan.schema.json``).

A pure function of what the CLI found: no I/O, no clock, so the same findings give the same bytes
and a second run for the same tag names the same branch and titles (the workflow then updates the
pull request or issue it opened before instead of opening another). The workflow reads only this
file: every decision is made here, where it is tested.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from generator.builder.deltas import Outcome
from generator.errors import DeltaDoesNotApply, EditDoesNotApply, PatchgenError
from generator.pins.matrix import Row
from generator.pins.pin import PIN_FILE
from generator.tags import is_commit

SCHEMA_VERSION = 1
MODULE = "generated/balance_scheduler.py"
BRANCH_PREFIX = "balance-patchgen/vllm-"
TITLE_PREFIX = "balance-patchgen: "
# GitHub refuses a pull request or issue body over 65,536 characters (the schema's bound); the diff gives way first.
GITHUB_BODY_MAX = 65_536
BODY_LIMIT = 60_000

Plan = dict[str, Any]


def branch_for(tag: str) -> str:
    return f"{BRANCH_PREFIX}{tag}"


def pull_request_title(tag: str) -> str:
    return f"{TITLE_PREFIX}bump vLLM to {tag}"


def issue_title(where: str, error: PatchgenError | None = None) -> str:
    """One title per tag or ref (``v0.27.1``, ``main``) and kind, so the workflow finds the issue it opened."""
    if isinstance(error, EditDoesNotApply):
        return f"{TITLE_PREFIX}vLLM {where}: a shipped spec no longer applies"
    return f"{TITLE_PREFIX}vLLM {where}: a balance delta no longer applies"


def _what_to_do(error: PatchgenError, tag: str) -> str:
    if isinstance(error, EditDoesNotApply):
        return (
            "Upstream changed code an edit of a shipped spec anchors on. Re-anchor the edit in "
            "`generator/tree/layouts/` (docs/copies.md says what may match loosely), or declare where it stops "
            "(`until`, `why`: a maintainer's decision); then `balance-patchgen specs sweep` and `make test`. "
            "Trees meet this as exit 4 on `bump` until then (docs/adopting.md, 'When a bump refuses')."
        )
    return (
        "Upstream changed the shape an anchor relies on. Accepting a new shape is a maintainer's decision, "
        "made in `generator/builder/deltas.py` (and its independent twin in `generator/builder/verify.py`), never a "
        f"silent skip: see `docs/pin-bump.md`. Then `balance-patchgen bump {tag}` and `make test`, or keep the pin."
    )


def upstream_tests_title(tag: str) -> str:
    return f"{TITLE_PREFIX}vLLM {tag}: its own scheduler tests differ on the generated copy"


# Where ``bumped``'s body puts upstream's schedule() diff, its last and longest section.
DIFF_SECTION = "### Upstream `Scheduler.schedule()`"


def judged(plan: Plan, summary: str, *, clean: bool) -> Plan:
    """A ``bumped`` plan after vLLM's own scheduler tests ran at its tag on the new copy (``make upstream-tests``).

    Clean: the same pull request, the summary in its body before upstream's diff. Not clean: an issue instead
    (as for a delta that no longer applies), the summary and the diff in its body; no pull request opens.
    """
    if plan.get("action") != "pull-request" or not isinstance(plan.get("pull_request"), dict):
        raise ValueError("only a plan for a pull request is judged by the upstream tests")
    body: str = plan["pull_request"]["body"]
    at = body.find(DIFF_SECTION)
    section = summary.rstrip("\n")
    if clean:
        amended = f"{body[:at]}{section}\n\n{body[at:]}" if at >= 0 else f"{body.rstrip()}\n\n{section}\n"
        if len(amended) > GITHUB_BODY_MAX:
            raise ValueError(f"the pull request body would be {len(amended)} characters, over {GITHUB_BODY_MAX}")
        return {**plan, "pull_request": {**plan["pull_request"], "body": amended}}
    tag = plan["tag"]
    intro = (
        f"`balance-patchgen bump {tag}` applies, but vLLM's own scheduler tests at {tag} do not agree with the "
        "generated copy (`make upstream-tests`), so no pull request was opened. Opened by the `bump` workflow; "
        "it updates this issue while the difference lasts."
    )
    todo = _section(
        "What to do",
        f"In a checkout: `balance-patchgen bump {tag}`, then `make test` (it runs `make upstream-tests`); "
        "`build/upstream-tests/TAG/report.json` names each test and `schedule()` call that differs. "
        "See docs/upstream-tests.md.",
    )
    rest = body[at:] if at >= 0 else ""
    return {
        **plan,
        "outcome": "upstream-tests-differ",
        "action": "issue",
        "summary": f"bump {plan['pinned']} -> {tag} held: vLLM's own scheduler tests differ on the new copy",
        "pull_request": None,
        "issue": {"title": upstream_tests_title(tag), "body": _clip("\n\n".join([intro, section, todo, rest]))},
    }


def dumps(plan: Plan) -> str:
    return json.dumps(plan, indent=2, ensure_ascii=False) + "\n"


def up_to_date(pinned: str) -> Plan:
    """Nothing to do: no final release on the index is newer than the pin."""
    return _plan(
        "bump",
        pinned=pinned,
        tag=None,
        outcome="up-to-date",
        action="none",
        summary=f"already at the newest vLLM release, {pinned}",
    )


def bumped(
    pinned: str,
    tag: str,
    *,
    method_diff: str,
    outcomes: Sequence[Outcome],
    no_copy_reason: str | None,
    rows: Sequence[Row],
    impact: dict[str, Any] | None = None,
    impact_markdown: str = "",
    specs: Sequence[str] = (),
    adapt: dict[str, Any] | None = None,
    adapt_markdown: str = "",
    explain: dict[str, Any] | None = None,
    explain_markdown: str = "",
) -> Plan:
    """``bump`` to ``tag`` applies: a pull request. ``impact``: what the move does to the tree's couplings
    (``judge.couplings.report.summary_json``), its ``impact_markdown`` a section of the body; ``specs``: the
    shipped specs' sweep at ``tag`` (one line each), for the trees that bump to it. ``adapt`` (``bump --adapt``):
    what adapt writes in the same commit and what it leaves (``tree.adapt.report.to_json``), its
    ``adapt_markdown`` a section of the body; work left for a person makes the command exit 1, so the plan says 1.
    ``explain`` (``--results``): the tree's test run at ``tag`` explained (``judge.explain.report.to_json``), its
    ``explain_markdown`` a section of the body."""
    work = adapt["counts"]["work"] if adapt is not None else 0
    command = "bump --latest --adapt" if adapt is not None else "bump --latest"
    if no_copy_reason is not None:
        done = f"`{MODULE}` is removed: {no_copy_reason}."
    else:
        done = (
            f"`{MODULE}` regenerated from vLLM {tag} and checked by `verify` "
            "(its `schedule()` is upstream's plus exactly the deltas below)."
        )
    sections = [
        f"Pin bump from vLLM {pinned} to {tag}, opened by the `bump` workflow (`balance-patchgen {command}`). {done}",
        _checklist(tag),
        _section(f"What each delta does at {tag}", _deltas_text(outcomes, tag, no_copy_reason)),
        _matrix_section(pinned, rows),
        *(
            [
                _section(
                    f"The shipped specs at {tag} (`balance-patchgen specs sweep {tag}`)",
                    _fenced("\n".join(specs), "text"),
                )
            ]
            if specs
            else []
        ),
        *([impact_markdown.rstrip("\n")] if impact_markdown else []),
        *([adapt_markdown.rstrip("\n")] if adapt_markdown else []),
        *([explain_markdown.rstrip("\n")] if explain_markdown else []),
    ]
    body = _with_diff(sections, pinned, tag, method_diff)
    return _plan(
        "bump",
        pinned=pinned,
        tag=tag,
        impact=impact,
        adapt=adapt,
        explain=explain,
        outcome="bumped",
        action="pull-request",
        summary=f"bump {pinned} -> {tag}" + (f"; adapt left {work} for a person" if work else ""),
        exit_code=1 if work else 0,
        deltas=[_outcome_json(o) for o in outcomes],
        matrix=[_row_json(r) for r in rows],
        pull_request={
            "branch": branch_for(tag),
            "title": pull_request_title(tag),
            "body": body,
            "commit_message": f"Bump vLLM to {tag}: regenerate {MODULE}"
            + (", and adapt's mechanical part" if adapt is not None else "")
            + f"\n\nbalance-patchgen {command}: {PIN_FILE} {pinned} -> {tag}.\n",
        },
    )


def blocked(
    pinned: str,
    tag: str,
    *,
    method_diff: str,
    error: PatchgenError,
    rows: Sequence[Row],
    impact: dict[str, Any] | None = None,
    impact_markdown: str = "",
    explain: dict[str, Any] | None = None,
    explain_markdown: str = "",
) -> Plan:
    """``bump`` to ``tag`` exits 4: an issue for a maintainer, the pin stays (with ``explain``, what the tree's
    test run at ``tag`` hit, as for a pull request)."""
    failure = _failure_json(error)
    sections = [
        f"`balance-patchgen bump {tag}` exits 4: the pin stays at {pinned} until a maintainer decides. "
        "Opened by the `bump` workflow; it updates this issue while the failure lasts.",
        _section("What failed", f"{error}\n\nUpstream lines where it was expected:\n\n{_fenced(error.detail, 'text')}")
        if error.detail
        else _section("What failed", str(error)),
        _section("What to do", _what_to_do(error, tag)),
        _matrix_section(pinned, rows),
        *([impact_markdown.rstrip("\n")] if impact_markdown else []),
        *([explain_markdown.rstrip("\n")] if explain_markdown else []),
    ]
    body = _with_diff(sections, pinned, tag, method_diff)
    return _plan(
        "bump",
        pinned=pinned,
        tag=tag,
        impact=impact,
        explain=explain,
        outcome="delta-does-not-apply",
        action="issue",
        summary=f"bump {pinned} -> {tag} blocked: {error}",
        exit_code=4,
        failure=failure,
        matrix=[_row_json(r) for r in rows],
        issue={"title": issue_title(tag, error), "body": body},
    )


def matrix_plan(asked: Sequence[str], rows: Sequence[Row]) -> Plan:
    """``matrix --plan``: an issue when a delta no longer applies at any of ``asked`` (e.g. vLLM main)."""
    failed = [r for r in rows if r.error is not None]
    where = ", ".join(name[:12] if is_commit(name) else name for name in asked)
    plan = _plan(
        "matrix",
        pinned=None,
        tag=None,
        outcome="delta-does-not-apply" if failed else "ok",
        action="issue" if failed else "none",
        summary=f"{len(failed)} of {len(rows)} failed" if failed else f"the deltas apply at {where}",
        exit_code=4 if failed else 0,
        matrix=[_row_json(r) for r in rows],
    )
    if failed:
        first = failed[0].error
        assert first is not None
        plan["failure"] = _failure_json(first)
        specs_only = all(isinstance(r.error, EditDoesNotApply) for r in failed)
        lines = "\n".join(r.line for r in rows)
        what = "an edit of a shipped spec" if specs_only else "a balance delta"
        body = [
            f"`balance-patchgen matrix {' '.join(asked)}` finds {what} that no longer applies. "
            "Opened by the `bump` workflow's early warning; the next release cut from there would block the bump.",
            _section("matrix", _fenced(lines, "text")),
        ]
        for r in failed:
            assert r.error is not None
            if r.error.detail:
                body.append(_section(f"Upstream lines at {r.label}", _fenced(r.error.detail, "text")))
        body.append(
            _section(
                "What to do",
                "Nothing is broken yet: the pin is a release. "
                + (
                    "Re-anchor the spec's edit in `generator/tree/layouts/` before the release ships (docs/copies.md). "
                    if specs_only
                    else "Re-anchor the delta in `generator/builder/deltas.py` (and `generator/builder/verify.py`) "
                    "before the release ships, or tell vLLM upstream (`balance-patchgen seam`). "
                )
                + "Close this issue once `matrix` is clean again.",
            )
        )
        plan["issue"] = {"title": issue_title(where, first if specs_only else None), "body": _clip("\n\n".join(body))}
    return plan


def _plan(command: str, *, pinned: str | None, tag: str | None, outcome: str, action: str, **rest: Any) -> Plan:
    plan: Plan = {
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "pinned": pinned,
        "tag": tag,
        "outcome": outcome,
        "action": action,
        "summary": rest.pop("summary"),
        "exit_code": rest.pop("exit_code", 0),
        "failure": None,
        "deltas": [],
        "matrix": [],
        "pull_request": None,
        "issue": None,
        "impact": None,
        "adapt": None,
        "explain": None,
    }
    plan.update(rest)
    return plan


def _failure_json(error: PatchgenError) -> dict[str, Any]:
    return {
        "error": type(error).__name__,
        "delta": error.delta if isinstance(error, DeltaDoesNotApply) else None,
        "message": str(error),
        "upstream_lines": error.detail,
    }


def _outcome_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "number": outcome.number,
        "title": outcome.title,
        "applied": outcome.applied,
        "details": list(outcome.details),
    }


def _row_json(row: Row) -> dict[str, Any]:
    return {"label": row.label, "ok": row.error is None, "line": row.line}


def _deltas_text(outcomes: Sequence[Outcome], tag: str, no_copy_reason: str | None) -> str:
    if no_copy_reason is not None:
        return f"None: {no_copy_reason}."
    items = []
    for o in outcomes:
        state = "" if o.applied else f" (not needed at {tag})"
        details = "".join(f"\n  - {d}" for d in o.details)
        items.append(f"- delta {o.number}: {o.title}{state}{details}")
    return "\n".join(items)


def _specs_section(tag: str, lines: Sequence[str]) -> str:
    return _section(
        f"The shipped specs at {tag} (`balance-patchgen specs sweep {tag}`)", _fenced("\n".join(lines), "text")
    )


def _matrix_section(pinned: str, rows: Sequence[Row]) -> str:
    lines = "\n".join(r.line for r in rows) or "(no release on the index)"
    return _section(f"Releases since the pin (`balance-patchgen matrix --since {pinned}`)", _fenced(lines, "text"))


def _checklist(tag: str) -> str:
    return _section(
        "What to check before merging",
        f"- CI is green on this branch: the drift gate, and `make test`, which installs vLLM {tag} and runs "
        "every test on it.\n"
        "- Upstream's `schedule()` diff at the end: does a change touch what the gate relies on (the WAITING "
        "loop, upstream's running-cap check, the count it compares)? The deltas below say what the leader is "
        "asked now.\n"
        f"- vllm-ascend deploys vLLM {tag} with this module: with balance on, the runtime refuses any other "
        "`scheduler.py` (`docs/runtime.md`).",
    )


def _with_diff(sections: list[str], pinned: str, tag: str, method_diff: str) -> str:
    """The body, ending with upstream's ``schedule()`` diff, cut at a line boundary if the body would be too long."""
    title = f"Upstream `Scheduler.schedule()` from {pinned} to {tag}"
    if not method_diff:
        return "\n\n".join([*sections, _section(title, "Identical.")])
    rest = len("\n\n".join(sections)) + len(title) + 200
    lines = method_diff.splitlines(keepends=True)
    diff = method_diff
    while lines and rest + len(diff) > BODY_LIMIT:
        lines = lines[: len(lines) - max(1, len(lines) // 10)]
        diff = "".join(lines)
    note = ""
    if diff != method_diff:
        dropped = method_diff.count("\n") - diff.count("\n")
        note = f"\n\n({dropped} more lines: `balance-patchgen bump {tag}` in a checkout prints the whole diff.)"
    return "\n\n".join([*sections, _section(title, _fenced(diff, "diff") + note)])


def _section(title: str, text: str) -> str:
    return f"### {title}\n\n{text}"


def _fenced(text: str, language: str) -> str:
    """A code block whose fence no backtick run inside ``text`` can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip(chr(10))}\n{fence}"


def _clip(body: str) -> str:
    if len(body) <= BODY_LIMIT:
        return body
    return body[:BODY_LIMIT].rsplit("\n", 1)[0] + "\n\n(cut: run the command in a checkout for the rest)"

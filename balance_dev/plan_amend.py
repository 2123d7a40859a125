"""A ``bump --plan`` plan amended by a harness that judged its tag: its summary goes into the pull request's body
(``generator.pins.plan.judged``), for `make upstream-tests` and `make downstream-suite` alike."""

from __future__ import annotations

import json
from pathlib import Path

from generator.pins import plan as plans


class PlanAmendError(Exception):
    """The plan cannot take the summary: not a pull request's plan, or a body over GitHub's limit."""


def amend(plan_path: Path, text: str, *, clean: bool = True) -> None:
    """Clean, ``text`` goes into the pull request's body before upstream's ``schedule()`` diff; not clean, the
    plan becomes an issue instead. Written whole, or the file is left as it was."""
    plan = json.loads(plan_path.read_text(encoding="utf-8"))
    pull = plan.get("pull_request")
    if not isinstance(pull, dict) or not isinstance(pull.get("body"), str):
        raise PlanAmendError(f"{plan_path} has no pull_request.body: is it a `bump --plan` plan for a pull request?")
    try:
        judged = plans.judged(plan, text, clean=clean)
    except ValueError as exc:
        raise PlanAmendError(str(exc)) from exc
    plan_path.write_text(plans.dumps(judged), encoding="utf-8")

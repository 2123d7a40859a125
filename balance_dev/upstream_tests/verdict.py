"""The verdict over all runs: per run, what is wrong with it compared with the ``upstream`` reference.

A ``same`` run must give every test the reference's outcome, the same ``schedule()`` outputs in the same
order and as many calls; a ``control`` run must break tests and admit no request; every run must have
constructed the schedulers it was meant to test (``substitution_problems``).
"""

from __future__ import annotations

from collections.abc import Sequence

from balance_dev.upstream_tests import record
from balance_dev.upstream_tests.runs import Result

BAD = ("failed", "error")


def judge(results: Sequence[Result], tag: str) -> dict[str, list[str]]:
    """Per run label, what is wrong with it (nothing: clean). The reference is the first ``reference`` run."""
    verdict: dict[str, list[str]] = {r.spec.label: ([r.problem] if r.problem else []) for r in results}
    reference = next((r for r in results if r.spec.role == "reference" and not r.problem), None)
    if reference is None:
        for r in results:
            if not r.problem:
                verdict[r.spec.label].append("no upstream run to compare with")
        return verdict
    ref_bad = [t for t, o in reference.outcomes.items() if o in BAD]
    if ref_bad:
        verdict[reference.spec.label].append(
            f"upstream's own Scheduler fails {len(ref_bad)} test(s) here (the environment, not a copy): "
            + ", ".join(ref_bad[:5])
        )
    if not reference.outcomes:
        verdict[reference.spec.label].append("no test ran")
    if reference.admitted() == 0 and reference.outcomes:
        verdict[reference.spec.label].append("upstream admitted no request: the controls would prove nothing")
    for r in results:
        if r.problem:
            continue
        problems = verdict[r.spec.label]
        problems += substitution_problems(r, tag)
        if r is reference:
            continue
        if r.spec.role == "same":
            for test in sorted(set(reference.outcomes) | set(r.outcomes)):
                old, new = reference.outcomes.get(test, "absent"), r.outcomes.get(test, "absent")
                if old != new:
                    detail = r.data.get("details", {}).get(test, "")
                    problems.append(f"{test}: {old} upstream, {new} here" + (f": {detail}" if detail else ""))
            for diff in record.compare(reference.outputs, r.outputs):
                problems.append(f"{diff.test}: outputs differ from upstream's: {diff.what}")
            ref_calls, calls = reference.data.get("calls", {}), r.data.get("calls", {})
            for test in sorted(t for t in set(ref_calls) | set(calls) if ref_calls.get(t) != calls.get(t)):
                problems.append(
                    f"{test}: {ref_calls.get(test, 0)} schedule() calls upstream, {calls.get(test, 0)} here"
                )
        elif r.spec.role == "control":
            if not any(o in BAD for o in r.outcomes.values()):
                problems.append("the gate held closed broke no test: the substitution is not live")
            if (admitted := r.admitted()) != 0:
                problems.append(f"the gate held closed, yet {admitted} request(s) were admitted")
    return verdict


def substitution_problems(r: Result, tag: str) -> list[str]:
    """Did this run's tests construct the schedulers it was meant to test?"""
    problems = []
    classes = r.classes()
    if r.spec.mode == "upstream":
        if foreign := r.balance_classes():
            problems.append(f"schedulers that are not vLLM's ran: {', '.join(sorted(foreign))}")
    else:
        if not classes:
            problems.append("no scheduler was constructed")
        if other := classes - r.substituted_classes():
            problems.append(f"schedulers the harness did not substitute ran: {', '.join(sorted(other))}")
        chosen = str(r.data.get("chosen", ""))
        if r.spec.seam and not chosen.endswith(".SeamBalanceScheduler"):
            problems.append(f"the seam run chose {chosen or 'nothing'}, not the seam override")
        if not r.spec.seam and r.data.get("upstream_tag") != tag:
            problems.append(f"the generated copy is {r.data.get('upstream_tag')}'s schedule(), not {tag}'s")
    if r.spec.seam != bool(r.data.get("scheduler_py")):
        problems.append("the run's scheduler.py is not the one asked for (seam applied or not)")
    return problems

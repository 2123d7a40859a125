"""The suite report: the committed results document and its summary lines (pure)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from balance_dev.suite.outcomes import Outcome, SuiteRun, collect_error_for, module_of
from generator.judge.explain.attribute import GONE, Attributed, Coupling

CLASSES = ("breaks", "review", "info", "unjudged", "nothing")


def executed(couplings: Iterable[Coupling], lines: Mapping[str, set[int]]) -> list[Coupling]:
    """The couplings whose code the run executed: the line impact's rule points at when it is not the site (a
    refused call: the import at the site runs whether or not the call does); for an override or a copy, a line
    of its body (its ``def`` runs when its class or module is made, called or not); else the site's line."""
    out = []
    for coupling in couplings:
        path, _, line = coupling.site.rpartition(":")
        ran = lines.get(coupling.at_path or path, set())
        body = coupling.scope.body if coupling.kind in ("override", "copy") else None
        if coupling.at_end:  # a function of the tree B's call reaches: its body, not its def line
            hit = any(coupling.at_line < n <= coupling.at_end for n in ran)
        elif coupling.at_line:
            hit = coupling.at_line in ran
        elif body is not None:
            hit = any(body[0] <= n <= body[1] for n in ran)
        else:
            hit = int(line) in ran
        if hit:
            out.append(coupling)
    return out


def slowest_modules(run: SuiteRun, top: int = 10) -> list[dict[str, object]]:
    seconds: dict[str, float] = defaultdict(float)
    for outcome in run.tests.values():
        seconds[module_of(outcome.test)] += outcome.seconds
    ranked = sorted(seconds.items(), key=lambda item: (-item[1], item[0]))[:top]
    return [{"module": module, "seconds": round(s, 1)} for module, s in ranked]


def _line(outcome: Outcome) -> dict[str, str]:
    return {"test": outcome.test, "outcome": outcome.outcome, "error": outcome.error}


def refused(coupling: Coupling, imports: set[tuple[str, int, str]]) -> bool:
    """Python refused, at B, to import the name the coupling reaches or a name it lies under
    (peel.refused_imports): at the coupling's own statement, or at another that imports it first (peeled
    there, not asked again). An import of it fails so; a patch or an override of a member of it can only be
    reached by importing it (``mock.patch`` imports its target's module, an assignment and a class statement
    need the object), so they fail with it. An assignment to a gone name in a module that imports raises
    nothing: that is not Python's word, and is not counted."""
    if coupling.kind not in ("import", "patch", "override"):
        return False
    return any(coupling.upstream == name or coupling.upstream.startswith(f"{name}.") for _, _, name in imports)


# impact's breaks rules whose code stops running at B rather than raising: no failing test can show them
SILENT = frozenset({"override-gone", "patch-lands-elsewhere"})


def scores(
    attributed: list[Attributed],
    breaks: list[Coupling],
    breaks_run: list[Coupling] | None,
    refused_imports: set[tuple[str, int, str]] | None = None,
) -> dict[str, object]:
    """Issue 39 item 4's figures for one run at B: the bump's failures by the strongest verdict and the
    status of the couplings they hit; of the ``breaks`` couplings executed at A, how many fail at B: a
    failure hits them, or (a peeled run) Python refused their import statement before peeling ran past it."""
    by_class = Counter(a.verdict for a in attributed)
    hit_sites = {(hit.site, hit.upstream) for a in attributed for hit in a.hits}
    doc: dict[str, object] = {"bump_failures": len(attributed)}
    doc["by_verdict"] = {name: by_class.get(name, 0) for name in CLASSES}
    statuses = Counter(
        a.hits[0].status if len({h.status for h in a.hits}) == 1 else "several" for a in attributed if a.hits
    )
    doc["by_status"] = dict(sorted(statuses.items()))
    # item 4's goals: >= 90% of the failures on a breaks or review coupling, >= 80% of the executed breaks fail
    judged = by_class.get("breaks", 0) + by_class.get("review", 0)
    doc["breaks_or_review_share"] = round(judged / len(attributed), 3) if attributed else None
    doc["breaks_couplings"] = len(breaks)
    if breaks_run is not None:
        failing = [c for c in breaks_run if (c.site, c.upstream) in hit_sites]
        doc["breaks_executed_at_from"] = len(breaks_run)
        if refused_imports is not None:
            at_import = [c for c in breaks_run if c not in failing and refused(c, refused_imports)]
            doc["breaks_executed_hit_by_a_failure"] = len(failing)
            doc["breaks_executed_import_refused"] = len(at_import)
            failing += at_import
        doc["breaks_executed_failing_at_to"] = len(failing)
        # the rest by impact's rule: an override B's callers no longer call, a patch installing nothing at B
        # stop working silently; a unit test calling the tree's code directly does not see them
        ran = Counter(c.rule or "?" for c in breaks_run)
        doc["breaks_executed_by_rule"] = dict(sorted(ran.items(), key=lambda i: (-i[1], i[0])))
        quiet = Counter(c.rule or "?" for c in breaks_run if c not in failing)
        doc["breaks_executed_not_failing_by_rule"] = dict(sorted(quiet.items(), key=lambda i: (-i[1], i[0])))
        doc["breaks_executed_not_failing"] = [
            {"site": c.site, "upstream": c.upstream, "rule": c.rule}
            for c in sorted(breaks_run, key=lambda c: (c.rule, c.site, c.upstream))
            if c not in failing
        ]
        doc["breaks_executed_failing_share"] = round(len(failing) / len(breaks_run), 3) if breaks_run else None
        # precision where a failure can show it: the silent rules' code stops running at B, it raises nothing
        raising = [c for c in breaks_run if c.rule not in SILENT]
        shown = sum(c in failing for c in raising)
        doc["breaks_raising_executed_at_from"] = len(raising)
        doc["breaks_raising_executed_failing_at_to"] = shown
        doc["breaks_raising_executed_failing_share"] = round(shown / len(raising), 3) if raising else None
        doc["breaks_silent_executed_at_from"] = len(breaks_run) - len(raising)
    doc["breaks_silent_couplings"] = sum(c.rule in SILENT for c in breaks)
    return doc


def failure_lines(attributed: list[Attributed]) -> list[dict[str, object]]:
    return [
        {
            "test": a.test,
            "error": a.error,
            "couplings": [
                {"site": h.site, "upstream": h.upstream, "verdict": h.verdict, "status": h.status, "rule": h.rule}
                for h in a.hits
            ],
        }
        for a in attributed
    ]


def document(
    head: Mapping[str, object],
    at_from: SuiteRun,
    at_to: SuiteRun,
    attributed: list[Attributed],
    theirs: list[Outcome],
    breaks: list[Coupling],
    breaks_run: list[Coupling] | None,
) -> dict[str, object]:
    doc: dict[str, object] = dict(head)
    doc["at_from"] = at_from.counts()
    doc["at_to"] = at_to.counts()
    doc |= scores(attributed, breaks, breaks_run)
    doc["timeouts"] = {"at_from": at_from.timeouts(), "at_to": at_to.timeouts()}
    doc["theirs"] = [_line(o) for o in theirs]
    doc["failure_groups"] = groups(attributed)
    doc["failures"] = failure_lines(attributed)
    return doc


def absent_at_to(at_from: SuiteRun, at_to: SuiteRun) -> list[str]:
    """Tests passing at A that B neither ran nor failed to collect (a parametrization over a stand-in that
    collected to nothing, say): not counted as the bump's failures, counted here."""
    return [
        test
        for test, before in sorted(at_from.tests.items())
        if before.outcome == "passed" and test not in at_to.tests and collect_error_for(at_to, test) is None
    ]


def peeled_part(
    peeling: Mapping[str, object],
    at_from: SuiteRun,
    at_peeled: SuiteRun,
    attributed: list[Attributed],
    breaks: list[Coupling],
    breaks_run: list[Coupling] | None,
    uses: list[dict[str, object]],
    refused_imports: set[tuple[str, int, str]] | None = None,
) -> dict[str, object]:
    """The run at B past each blocking import (peel.py): its peels in order, its counts, item 4's scores on
    it, what the stand-ins absorbed while collecting, and its failures (the unpeeled ones stay above)."""
    doc: dict[str, object] = dict(peeling)
    doc["at_to"] = at_peeled.counts()
    doc |= scores(attributed, breaks, breaks_run, refused_imports)
    on_stand_ins = Counter(m[1] for a in attributed if (m := GONE.match(a.error)))
    doc["failing_on_a_stand_in"] = sum(on_stand_ins.values())
    doc["failing_by_stand_in"] = dict(sorted(on_stand_ins.items(), key=lambda item: (-item[1], item[0])))
    absent = absent_at_to(at_from, at_peeled)
    doc["absent_at_to"] = {"tests": len(absent), "first": absent[:20]}
    doc["timeouts"] = at_peeled.timeouts()
    doc["collection_uses"] = uses
    doc["failure_groups"] = groups(attributed)
    doc["failures"] = failure_lines(attributed)
    return doc


def _split(peeled: Mapping[str, object]) -> str:
    if "breaks_executed_import_refused" not in peeled:
        return ""
    return (
        f"; a failure hits {peeled['breaks_executed_hit_by_a_failure']}, Python refused the import of "
        f"{peeled['breaks_executed_import_refused']} more before peeling ran past it"
    )


def groups(attributed: list[Attributed]) -> list[dict[str, object]]:
    """The failures by (error, couplings hit): how many tests each, most first (a reader's index)."""
    count: Counter[tuple[str, tuple[tuple[str, str, str | None, str], ...]]] = Counter()
    for a in attributed:
        count[(a.error, tuple((h.site, h.upstream, h.verdict or "", h.status) for h in a.hits))] += 1
    ranked = sorted(count.items(), key=lambda item: (-item[1], item[0][0], item[0][1]))
    return [
        {
            "tests": n,
            "error": error,
            "couplings": [{"site": s, "upstream": u, "verdict": v or None, "status": st} for s, u, v, st in hits],
        }
        for (error, hits), n in ranked
    ]


def dumps(doc: Mapping[str, object]) -> str:
    """The document with one failure a line (the run's, and the peeled run's): thousands of failures stay a
    readable, diffable file; the failures last."""
    slots: dict[str, list[object]] = {}

    def hold(part: Mapping[str, object]) -> dict[str, object]:
        kept = {k: v for k, v in part.items() if k != "failures"}
        if "failures" in part:
            slot = f"@@failures-{len(slots)}@@"
            failures = part["failures"]
            assert isinstance(failures, list)
            slots[slot], kept["failures"] = failures, slot
        return kept

    top = hold(doc)
    peeled = top.get("peeled")
    if isinstance(peeled, dict):
        top["peeled"] = hold(peeled)
    text = json.dumps(top, indent=1)
    for slot, failures in slots.items():
        at = text.index(f'"{slot}"')
        indent = at - text.rindex("\n", 0, at) - 1 - len('"failures": ')
        lines = ",\n".join(" " * (indent + 1) + json.dumps(f, sort_keys=False) for f in failures)
        text = text.replace(f'"{slot}"', "[\n" + lines + ("\n" if lines else "") + " " * indent + "]")
    return text + "\n"


def summary_lines(doc: Mapping[str, object]) -> list[str]:
    rows = [f"{'release':<10} {'collected':>9} {'passed':>7} {'failed':>7} {'errors':>7} {'skipped':>7} {'time':>7}"]
    for key in ("at_from", "at_to"):
        c = doc[key]
        assert isinstance(c, dict)
        label = str(doc["from" if key == "at_from" else "to"])
        rows.append(
            f"{label:<10} {c['collected']:>9} {c['passed']:>7} {c['failed']:>7} {c['errors']:>7} "
            f"{c['skipped']:>7} {c['seconds']:>6}s"
        )
    rows.append(f"bump failures (pass at {doc['from']}, fail or error at {doc['to']}): {doc['bump_failures']}")
    rows.append(f"  by the strongest verdict of the couplings they hit: {doc['by_verdict']}")
    rows.append(f"  by the status of the couplings they hit: {doc['by_status']}")
    if "breaks_executed_at_from" in doc:
        rows.append(
            f"  breaks couplings: {doc['breaks_couplings']}, "
            f"executed at {doc['from']}: {doc['breaks_executed_at_from']}, "
            f"of which hit by a failure at {doc['to']}: {doc['breaks_executed_failing_at_to']}"
        )
    theirs = doc["theirs"]
    assert isinstance(theirs, list)
    rows.append(f"  failing already at {doc['from']} (theirs): {len(theirs)}")
    peeled = doc.get("peeled")
    if isinstance(peeled, dict):
        rows += peeled_lines(peeled, str(doc["from"]), str(doc["to"]))
    if isinstance(adapted := doc.get("adapted"), dict):
        rows.append(adapted_line(adapted, str(doc["to"])))
    if isinstance(spanned := doc.get("span"), dict):
        rows.append(span_line(spanned, str(doc["from"]), str(doc["to"])))
    return rows


def adapted_line(adapted: Mapping[str, object], label_to: str) -> str:
    """The run at B on the adapted copy beside the tree's (adapted.py), in one sentence."""
    said = adapted["adapt"]
    assert isinstance(said, dict)
    changed = said["files_changed"]
    assert isinstance(changed, list)
    kinds = ""
    fixed, broken = adapted.get("fixed_by_kind"), adapted.get("broken_by_kind")
    if isinstance(fixed, dict) and isinstance(broken, dict):
        kinds = f" (fixed by kind: {_kinds(fixed)}; broken: {_kinds(broken)})"
        if "signature_failures_gone" in adapted:
            kinds += (
                f"; signature failures answered (passing, or failing further on): {adapted['signature_failures_gone']}"
            )
    return (
        f"after adapt (exit {said['exit']}, {len(changed)} files changed), at {label_to}: bump failures "
        f"{adapted['bump_failures_before']} -> {adapted['bump_failures_after']}; adapt fixed "
        f"{adapted['fixed_by_adapt']}, broke {adapted['broken_by_adapt']}{kinds}"
    )


def span_line(spanned: Mapping[str, object], label_from: str, label_to: str) -> str:
    """The spanned copy at A and at B (adapted.spanned), in one sentence."""
    said = spanned["adapt"]
    assert isinstance(said, dict)
    changed = said["files_changed"]
    assert isinstance(changed, list)
    return (
        f"after adapt --span (exit {said['exit']}, {len(changed)} files changed): at {label_from} "
        f"{spanned['new_failures_at_from']} tests fail that passed; at {label_to} bump failures "
        f"{spanned['bump_failures_at_to']} (the tree unadapted: {spanned['bump_failures_at_to_unspanned']})"
    )


def _kinds(counts: Mapping[str, object]) -> str:
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda i: (-int(str(i[1])), i[0]))) or "none"


def peeled_lines(peeled: Mapping[str, object], label_from: str, label_to: str) -> list[str]:
    c = peeled["at_to"]
    peels = peeled["peels"]
    assert isinstance(c, dict) and isinstance(peels, list)
    rows = [
        f"peeled at {label_to}: {len(peels)} stand-ins in {peeled['rounds']} collections ({peeled['stopped']}); "
        f"collected {c['collected']}, passed {c['passed']}, failed {c['failed']}, errors {c['errors']}, "
        f"skipped {c['skipped']}, {c['seconds']}s",
        f"  bump failures: {peeled['bump_failures']}, on a stand-in: {peeled['failing_on_a_stand_in']}; "
        f"by verdict: {peeled['by_verdict']}",
    ]
    if "breaks_executed_at_from" in peeled:
        rows.append(
            f"  breaks couplings executed at {label_from}: {peeled['breaks_executed_at_from']}, "
            f"of which fail at {label_to}: {peeled['breaks_executed_failing_at_to']}{_split(peeled)}"
        )
    if "breaks_raising_executed_at_from" in peeled:
        rows.append(
            f"  raising rules: {peeled['breaks_raising_executed_at_from']} executed, "
            f"{peeled['breaks_raising_executed_failing_at_to']} fail at {label_to}; silent rules "
            f"({', '.join(sorted(SILENT))}): {peeled['breaks_silent_couplings']} couplings, "
            f"{peeled['breaks_silent_executed_at_from']} executed; "
            f"review couplings: {peeled.get('review_couplings', '?')}"
        )
    return rows


# Failure groups shown in a pull request's body; the report file has them all.
MARKDOWN_GROUPS = 20


def _cell(text: object, width: int = 200) -> str:
    flat = " ".join(str(text).split()).replace("|", "\\|")
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def markdown(doc: Mapping[str, object], heading: str = "###") -> str:
    """The report as a section of the bump's pull request: the counts at both releases, the bump's failures by
    the strongest verdict of the couplings they hit, and the failures by coupling, most tests first."""
    lines = [
        f"{heading} The plugin's unit suite at {doc['from']} and {doc['to']}",
        "",
        f"{doc['tree']}'s own unit suite run at both releases, the tree unchanged (`make downstream-suite`; "
        f"rerun: `{doc['command']}`).",
        "",
        "| release | collected | passed | failed | errors | skipped | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, label in (("at_from", doc["from"]), ("at_to", doc["to"])):
        c = doc[key]
        assert isinstance(c, dict)
        lines.append(
            f"| {label} | {c['collected']} | {c['passed']} | {c['failed']} | {c['errors']} | {c['skipped']} | "
            f"{c['seconds']} |"
        )
    by_verdict = doc["by_verdict"]
    assert isinstance(by_verdict, dict)
    counted = ", ".join(f"{name} {by_verdict.get(name, 0)}" for name in CLASSES)
    lines += [
        "",
        f"**{doc['bump_failures']} bump failures** (pass at {doc['from']}, fail or error at {doc['to']}); "
        f"by the strongest verdict of the couplings they hit: {counted}.",
    ]
    if "breaks_executed_at_from" in doc:
        lines.append(
            f"Of {doc['breaks_couplings']} `breaks` couplings, {doc['breaks_executed_at_from']} have a site their "
            f"tests execute at {doc['from']}; a failure at {doc['to']} hits {doc['breaks_executed_failing_at_to']}."
        )
    theirs = doc["theirs"]
    assert isinstance(theirs, list)
    lines.append(f"Failing at {doc['from']} already (the tree's own, not counted): {len(theirs)}.")
    found = doc["failure_groups"]
    assert isinstance(found, list)
    lines += _groups_table(found)
    peeled = doc.get("peeled")
    if isinstance(peeled, dict):
        lines += ["", *_peeled_markdown(peeled, str(doc["from"]), str(doc["to"]))]
    if isinstance(adapted := doc.get("adapted"), dict):
        lines += [
            "",
            adapted_line(adapted, str(doc["to"])) + " (`--adapt`: the suite on a copy of the tree after `adapt`).",
        ]
    if isinstance(spanned := doc.get("span"), dict):
        lines += ["", span_line(spanned, str(doc["from"]), str(doc["to"])) + " (`--span`: after `adapt --span`)."]
    return "\n".join(lines) + "\n"


def _groups_table(found: list[dict[str, object]]) -> list[str]:
    if not found:
        return []
    lines = ["", "| tests | error | couplings hit |", "|---|---|---|"]
    for group in found[:MARKDOWN_GROUPS]:
        couplings = group["couplings"]
        assert isinstance(couplings, list)
        hits = "; ".join(
            f"`{h['site']}` `{h['upstream']}` ({h['verdict'] or 'unjudged'}, {h['status']})" for h in couplings
        )
        shown = _cell(hits or "none: the tool is blind", 600)
        lines.append(f"| {group['tests']} | {_cell(group['error'])} | {shown} |")
    if len(found) > MARKDOWN_GROUPS:
        lines.append(f"\n... and {len(found) - MARKDOWN_GROUPS} more groups in the report file.")
    return lines


def _percent(share: object) -> str:
    return "n/a" if share is None else f"{100 * float(str(share)):.0f}%"


def _peeled_markdown(peeled: Mapping[str, object], label_from: str, label_to: str) -> list[str]:
    """The run at B past each blocking import: what the maintainer sees once each blocker is fixed."""
    c, peels, by_verdict = peeled["at_to"], peeled["peels"], peeled["by_verdict"]
    assert isinstance(c, dict) and isinstance(peels, list) and isinstance(by_verdict, dict)
    counted = ", ".join(f"{name} {by_verdict.get(name, 0)}" for name in CLASSES)
    lines = [
        f"**Peeled**: {len(peels)} imports of names {label_to} no longer has replaced by stand-ins, one blocker "
        f"at a time ({peeled['stopped']}): collected {c['collected']}, passed {c['passed']}, failed {c['failed']}, "
        f"errors {c['errors']}, skipped {c['skipped']}. {peeled['bump_failures']} bump failures "
        f"({peeled['failing_on_a_stand_in']} on a stand-in); by the strongest verdict: {counted} "
        f"(on `breaks` or `review`: {_percent(peeled['breaks_or_review_share'])}).",
    ]
    if "breaks_executed_at_from" in peeled:
        lines[-1] += (
            f" Of {peeled['breaks_executed_at_from']} `breaks` couplings executed at {label_from}, "
            f"{peeled['breaks_executed_failing_at_to']} fail at {label_to} "
            f"({_percent(peeled['breaks_executed_failing_share'])}{_split(peeled)})."
        )
    if peels:
        lines += ["", "| peel | gone at " + label_to + " | asked for by |", "|---|---|---|"]
        for number, p in enumerate(peels[:MARKDOWN_GROUPS], 1):
            lines.append(f"| {number} | `{p['name']}` | {_cell(p['where'])}: {_cell(p['error'], 160)} |")
        if len(peels) > MARKDOWN_GROUPS:
            lines.append(f"\n... and {len(peels) - MARKDOWN_GROUPS} more peels in the report file.")
    found = peeled["failure_groups"]
    assert isinstance(found, list)
    return lines + _groups_table(found)

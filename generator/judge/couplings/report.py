"""An impact as a maintainer reads it: text, JSON (``impact.schema.json``), markdown for a pull request, annotations.

Counts come first. Text, markdown and annotations then lead with what the bump breaks, then what needs
review (``verdicts.RULES``), each coupling with its status and the rule's words; the ``info`` couplings
are counted, not listed (text lists them with ``--all``; JSON lists every coupling). Upstream's own
diff of each changed definition is given once per definition, in JSON and (folded) in markdown,
however many sites use it.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from generator.judge.couplings import changes, verdicts
from generator.judge.couplings.impact import KINDS, Impact
from generator.judge.couplings.record import Coupling, is_test

SCHEMA_VERSION = 1
_LISTED = (verdicts.BREAKS, verdicts.REVIEW)  # listed; info is counted (text: listed with --all)


def _describe(coupling: Coupling, impact: Impact) -> str:
    """What happened to the coupling's definition, in a few words."""
    if coupling.why:
        return coupling.why
    symbol = impact.symbols.get(coupling.upstream)
    change = symbol.change_for(coupling.imports) if symbol is not None else None
    words = []
    if change is not None and change.parts:
        words.append(", ".join(change.parts))
    if change is not None and change.detail:
        words.append(change.detail)
    if coupling.status == changes.REDUNDANT:
        words = [f"the copy is {impact.new}'s function: the copy can go"]
    if coupling.overlap:
        words.append(f"upstream changed {len(coupling.overlap)} statement(s) the copy's edits touch")
    if coupling.touched is False:
        words.append("declared, but no code of the tree touches it")
    if coupling.declared is False:
        words.append("not declared in the registry")
    return "; ".join(words)


def _named(coupling: Coupling) -> str:
    shown = coupling.upstream
    if coupling.name and coupling.name != coupling.upstream:
        shown += f" (defined as {coupling.name})"
    return shown


def summary_lines(impact: Impact, *, where: bool = True) -> list[str]:
    """Counts first: by status, by kind; ``where``: the tree's root in the first line."""
    counts = impact.counts()
    kinds = Counter(c.kind for c in impact.couplings)
    tests = sum(is_test(c.path) for c in impact.couplings)
    total = sum(counts.values())
    judged = impact.verdicts()
    lines = [
        f"{total} couplings{f' of {impact.root}' if where else ''} to vLLM, {impact.old} -> {impact.new}: "
        + ", ".join(f"{judged[v]} {v}" for v in verdicts.VERDICTS),
        "by status: " + ", ".join(f"{counts[s]} {s}" for s in changes.STATUSES),
        "by kind: " + ", ".join(f"{kinds[k]} {k}" for k in KINDS) + f" ({tests} in tests)",
        f"{impact.files} files read"
        + (f", {len(impact.skipped)} skipped ({_skipped(impact)})" if impact.skipped else "")
        + (f", {len(impact.newer)} of a newer Python ({_newer(impact)})" if impact.newer else "")
        + (f"; registry {impact.registry}" if impact.registry else ""),
    ]
    if impact.dead_gates:
        shown = "; ".join(f"{p}:{n} names {r}" for p, n, r in impact.dead_gates[:3])
        more = f"; +{len(impact.dead_gates) - 3} more" if len(impact.dead_gates) > 3 else ""
        lines.append(f"{len(impact.dead_gates)} version gates dead at {impact.old} (adapt retires them): {shown}{more}")
    return lines


def _newer(impact: Impact, limit: int = 3) -> str:
    shown = "; ".join(f"{s.path} {s.reason}" for s in impact.newer[:limit])
    return shown + (f"; +{len(impact.newer) - limit} more" if len(impact.newer) > limit else "")


def timing_line(impact: Impact) -> str:
    """Where the time went (stderr: the report itself is the same bytes run to run)."""
    took = ", ".join(f"{k} {v:.1f}" for k, v in impact.seconds.items())
    return f"{sum(impact.seconds.values()):.1f} s ({took})"


def _skipped(impact: Impact, limit: int = 3) -> str:
    shown = "; ".join(f"{s.path} {s.reason}" for s in impact.skipped[:limit])
    return shown + (f"; +{len(impact.skipped) - limit} more" if len(impact.skipped) > limit else "")


def _by_verdict(couplings: Iterable[Coupling]) -> dict[str, dict[str, list[Coupling]]]:
    grouped: dict[str, dict[str, list[Coupling]]] = defaultdict(lambda: defaultdict(list))
    for coupling in couplings:
        grouped[coupling.verdict][coupling.path].append(coupling)
    return grouped


def _judged(coupling: Coupling, impact: Impact) -> str:
    """A listed coupling's words: its status, the verdict's reason, then what happened upstream."""
    said = _describe(coupling, impact)
    reason = coupling.reason if coupling.reason and coupling.reason != coupling.why else ""
    return "; ".join(w for w in (f"{coupling.status} ({coupling.rule})", reason, said) if w)


def text_lines(impact: Impact, *, everything: bool = False) -> list[str]:
    out = summary_lines(impact)
    grouped = _by_verdict(impact.couplings)
    for verdict in verdicts.VERDICTS if everything else _LISTED:
        files = grouped.get(verdict)
        if not files:
            continue
        out += ["", f"{verdict} ({sum(len(v) for v in files.values())})"]
        for path in sorted(files, key=lambda p: (is_test(p), p)):  # the tree's own code before its tests
            out.append(f"  {path}")
            for c in files[path]:
                out.append(f"    :{c.line} {c.kind} {_named(c)}: {_judged(c, impact)}")
    if not everything and grouped.get(verdicts.INFO):
        out += ["", f"info ({sum(len(v) for v in grouped[verdicts.INFO].values())}): counted; --all lists them"]
    return out


def couplings_lines(impact: Impact) -> list[str]:
    """``couplings``: every coupling of the tree by file, named as release A defines it."""
    out = [line for line in summary_lines(impact)[2:]]
    files: dict[str, list[Coupling]] = defaultdict(list)
    for coupling in impact.couplings:
        files[coupling.path].append(coupling)
    for path in sorted(files, key=lambda p: (is_test(p), p)):
        out += ["", path]
        for c in files[path]:
            where = f" ({c.why})" if c.why else (" (unresolved)" if c.status == changes.UNRESOLVED else "")
            extra = f" - {c.detail}" if c.detail and not c.why else ""
            out.append(f"  :{c.line} {c.kind} {_named(c)}{where}{extra}")
    return out


def to_json(impact: Impact) -> dict[str, Any]:
    symbols = {}
    for name, symbol in sorted(impact.symbols.items()):
        change = symbol.change
        if change.status == changes.UNCHANGED:
            continue
        symbols[name] = {
            "status": change.status,
            "parts": list(change.parts),
            "detail": change.detail,
            "moved_to": change.moved_to,
            "from": _definition(change.old),
            "to": _definition(change.new),
            "diff": change.diff,
            "commits": None if symbol.commits is None else [{"sha": s, "subject": m} for s, m in symbol.commits],
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "from": impact.old,
        "to": impact.new,
        "root": str(impact.root),
        "counts": impact.counts(),
        "verdicts": impact.verdicts(),
        "kinds": {k: sum(c.kind == k for c in impact.couplings) for k in KINDS},
        "files": impact.files,
        "skipped": [{"path": s.path, "reason": s.reason} for s in impact.skipped],
        "newer_syntax": [{"path": s.path, "reason": s.reason} for s in impact.newer],
        "dead_gates": [{"site": f"{p}:{n}", "release": r} for p, n, r in impact.dead_gates],
        "registry": impact.registry,
        "couplings": [_coupling(c) for c in impact.couplings],
        "symbols": symbols,
    }


def _definition(definition: changes.Definition | None) -> dict[str, Any] | None:
    if definition is None:
        return None
    lines = changes.lines_of(definition)
    return {"name": definition.name, "kind": definition.kind, "path": definition.path, "lines": lines and list(lines)}


def _coupling(c: Coupling) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": c.kind,
        "site": c.site,
        "upstream": c.upstream,
        "status": c.status,
        "name": c.name or None,
        "detail": c.detail,
        "test": is_test(c.path),
        "verdict": c.verdict,
        "rule": c.rule,
        "why": c.why or c.reason,  # an unresolved site: why it cannot be named (its rule's words)
    }
    if c.declared is not None:
        out["declared"] = c.declared
    if c.touched is not None:
        out["touched"] = c.touched
    if c.overlap:
        out["overlap"] = list(c.overlap)
    if c.at_line:
        out["at_line"] = c.at_line
    if c.at_path:
        out["at_path"] = c.at_path
    if c.at_end:
        out["at_end"] = c.at_end
    if c.receiver:
        out["receiver"] = c.receiver
    return out


def to_json_text(impact: Impact) -> str:
    return json.dumps(to_json(impact), indent=1, sort_keys=False) + "\n"


def github_lines(impact: Impact) -> list[str]:
    """One annotation at each coupling the bump breaks (error), then each that needs review (warning)."""
    out = []
    for verdict, level in ((verdicts.BREAKS, "error"), (verdicts.REVIEW, "warning")):
        for c in impact.couplings:
            if c.verdict != verdict:
                continue
            message = f"vLLM {impact.old} -> {impact.new}: {verdict}: {c.kind} of {_named(c)}: {_judged(c, impact)}"
            out.append(f"::{level} file={c.path},line={c.line}::{_escape(message)}")
    return out


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def markdown(impact: Impact, *, limit: int = 60_000, heading: str = "###", suite: str = "") -> str:
    """A pull-request section: counts, then each definition the bump breaks, then each to review, with its sites.

    ``info`` is counted. Upstream's diffs are folded; cut to ``limit`` characters (GitHub's body limit is
    65,536): the diffs go first, then the sites. ``suite``: markdown placed after the counts (what the
    plugin's own unit tests say of the bump, when they were run).
    """
    counts, judged = impact.counts(), impact.verdicts()
    head = [
        f"{heading} What vLLM {impact.old} -> {impact.new} does to the tree's couplings",
        "",
        f"**{judged[verdicts.BREAKS]} break, {judged[verdicts.REVIEW]} to review**, {judged[verdicts.INFO]} info "
        "(counted, not listed: `balance-patchgen impact --all` lists them).",
        "",
        "| " + " | ".join(changes.STATUSES) + " |",
        "|" + "---|" * len(changes.STATUSES),
        "| " + " | ".join(str(counts[s]) for s in changes.STATUSES) + " |",
        "",
        f"Kinds: {', '.join(f'{sum(c.kind == k for c in impact.couplings)} {k}' for k in KINDS)}; "
        f"read from both releases' own files (`balance-patchgen impact`, docs/impact.md).",
        *(["", suite.rstrip("\n")] if suite else []),
    ]
    needs = _needs_reading(impact)
    for with_diffs in (True, False):
        body = list(head)
        for verdict in _LISTED:
            listed = [n for n in needs if n[1] == verdict]
            if listed:
                body += ["", f"{heading}# {verdict} ({sum(len(u) for _, _, _, u in listed)} couplings)"]
            for name, _, status, used in listed:
                symbol = impact.symbols.get(name)
                said = _judged(used[0], impact)
                body.append("")
                body.append(f"- **{status}** `{name}`" + (f": {said}" if said else ""))
                shown = ", ".join(f"`{c.site}` ({c.kind})" for c in used[:8])
                body.append(f"  - used at {shown}" + (f" and {len(used) - 8} more" if len(used) > 8 else ""))
                diff = symbol.change_for(used[0].imports).diff if symbol is not None else ""
                if with_diffs and diff:
                    body += ["  <details><summary>upstream's diff</summary>", "", "  ```diff"]
                    body += [f"  {line}" for line in diff.splitlines()]
                    body += ["  ```", "  </details>"]
        text = "\n".join(body) + "\n"
        if len(text) <= limit:
            return text
    cut = text[: limit - 200].rsplit("\n- ", 1)[0]
    return cut + f"\n\n(cut at {limit} characters: `balance-patchgen impact --format json` has every coupling)\n"


def _needs_reading(impact: Impact) -> list[tuple[str, str, str, list[Coupling]]]:
    """Each vLLM name with a coupling that breaks or needs review: (name, verdict, status, its couplings).

    Breaks first, then review; within each by status, then name. A name's couplings can differ in
    verdict (an import of it fine where a patch of it breaks): each verdict lists its own.
    """
    sites: dict[tuple[str, str, str], list[Coupling]] = defaultdict(list)
    for c in impact.couplings:
        if c.verdict in _LISTED:
            sites[(c.upstream, c.verdict, c.status)].append(c)
    verdict_order = {v: n for n, v in enumerate(verdicts.VERDICTS)}
    order = {s: n for n, s in enumerate(changes.STATUSES)}
    ranked = sorted(sites.items(), key=lambda item: (verdict_order[item[0][1]], order[item[0][2]], item[0][0]))
    return [(name, verdict, status, used) for (name, verdict, status), used in ranked]


def summary_json(impact: Impact, *, sites: int = 20) -> dict[str, Any]:
    """What a bump's plan carries: counts, then each definition that breaks, then each to review, with its sites."""
    out = []
    for name, verdict, status, used in _needs_reading(impact):
        symbol = impact.symbols.get(name)
        change = symbol.change_for(used[0].imports) if symbol is not None else None
        out.append(
            {
                "name": name,
                "verdict": verdict,
                "why": sorted({c.reason for c in used})[0],
                "rules": sorted({c.rule for c in used}),
                "status": status,
                "parts": list(change.parts) if change else [],
                "detail": _describe(used[0], impact),
                "moved_to": change.moved_to if change else None,
                "sites": [f"{c.site} ({c.kind})" for c in used[:sites]],
                "more_sites": max(0, len(used) - sites),
                "diff": change.diff if change else "",
            }
        )
    kinds = {k: sum(c.kind == k for c in impact.couplings) for k in KINDS}
    return {
        "from": impact.old,
        "to": impact.new,
        "counts": impact.counts(),
        "verdicts": impact.verdicts(),
        "kinds": kinds,
        "symbols": out,
    }


def bump_lines(impact: Impact, *, listed: int = 40) -> list[str]:
    """What ``bump`` prints: the counts, then the definitions the bump breaks, then those to review."""
    out = summary_lines(impact, where=False)[:3]
    needs = _needs_reading(impact)
    for name, verdict, status, used in needs[:listed]:
        where = ", ".join(c.site for c in used[:3]) + (f" and {len(used) - 3} more" if len(used) > 3 else "")
        said = _judged(used[0], impact)
        out.append(f"  {verdict}: {status} {name}" + (f": {said}" if said else "") + f" (used at {where})")
    if len(needs) > listed:
        out.append(
            f"  ... and {len(needs) - listed} more: `balance-patchgen --root . impact --to {impact.new}` "
            "lists each with its sites"
        )
    return out

"""An impact as a maintainer reads it: text, JSON (``impact.schema.json``), markdown for a pull request, annotations.

Counts come first. Text and markdown then list what needs reading, by status (removed, moved, changed,
added, redundant, unresolved), then by file; the unchanged couplings are counted, not listed (JSON
lists every coupling). Upstream's own diff of each changed definition is given once per definition,
in JSON and (folded) in markdown, however many sites use it.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from generator.judge.couplings import changes
from generator.judge.couplings.impact import KINDS, Coupling, Impact, is_test

SCHEMA_VERSION = 1
_LISTED = [s for s in changes.STATUSES if s != changes.UNCHANGED]


def _describe(coupling: Coupling, impact: Impact) -> str:
    """What happened to the coupling's definition, in a few words."""
    if coupling.why:
        return coupling.why
    symbol = impact.symbols.get(coupling.upstream)
    change = symbol.change if symbol is not None else None
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
    lines = [
        f"{total} couplings{f' of {impact.root}' if where else ''} to vLLM, {impact.old} -> {impact.new}: "
        + ", ".join(f"{counts[s]} {s}" for s in changes.STATUSES),
        "by kind: " + ", ".join(f"{kinds[k]} {k}" for k in KINDS) + f" ({tests} in tests)",
        f"{impact.files} files read"
        + (f", {len(impact.skipped)} skipped ({_skipped(impact)})" if impact.skipped else "")
        + (f"; registry {impact.registry}" if impact.registry else ""),
    ]
    return lines


def timing_line(impact: Impact) -> str:
    """Where the time went (stderr: the report itself is the same bytes run to run)."""
    took = ", ".join(f"{k} {v:.1f}" for k, v in impact.seconds.items())
    return f"{sum(impact.seconds.values()):.1f} s ({took})"


def _skipped(impact: Impact, limit: int = 3) -> str:
    shown = "; ".join(f"{s.path} {s.reason}" for s in impact.skipped[:limit])
    return shown + (f"; +{len(impact.skipped) - limit} more" if len(impact.skipped) > limit else "")


def _by_status(couplings: Iterable[Coupling]) -> dict[str, dict[str, list[Coupling]]]:
    grouped: dict[str, dict[str, list[Coupling]]] = defaultdict(lambda: defaultdict(list))
    for coupling in couplings:
        grouped[coupling.status][coupling.path].append(coupling)
    return grouped


def text_lines(impact: Impact, *, everything: bool = False) -> list[str]:
    out = summary_lines(impact)
    grouped = _by_status(impact.couplings)
    for status in changes.STATUSES if everything else _LISTED:
        files = grouped.get(status)
        if not files:
            continue
        out += ["", f"{status} ({sum(len(v) for v in files.values())})"]
        for path in sorted(files, key=lambda p: (is_test(p), p)):  # the tree's own code before its tests
            out.append(f"  {path}")
            for c in files[path]:
                said = _describe(c, impact)
                out.append(f"    :{c.line} {c.kind} {_named(c)}" + (f": {said}" if said else ""))
    return out


def couplings_lines(impact: Impact) -> list[str]:
    """``couplings``: every coupling of the tree by file, named as release A defines it."""
    out = [line for line in summary_lines(impact)[1:]]
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
        "kinds": {k: sum(c.kind == k for c in impact.couplings) for k in KINDS},
        "files": impact.files,
        "skipped": [{"path": s.path, "reason": s.reason} for s in impact.skipped],
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
    }
    if c.why:
        out["why"] = c.why
    if c.declared is not None:
        out["declared"] = c.declared
    if c.touched is not None:
        out["touched"] = c.touched
    if c.overlap:
        out["overlap"] = list(c.overlap)
    return out


def to_json_text(impact: Impact) -> str:
    return json.dumps(to_json(impact), indent=1, sort_keys=False) + "\n"


def github_lines(impact: Impact) -> list[str]:
    """One annotation at each coupling whose upstream definition needs reading (warning; removed: error)."""
    out = []
    for c in impact.couplings:
        if c.status == changes.UNCHANGED:
            continue
        level = "error" if c.status == changes.REMOVED else "warning"
        message = f"vLLM {impact.old} -> {impact.new}: {c.kind} of {_named(c)} is {c.status}"
        said = _describe(c, impact)
        message += f": {said}" if said else ""
        out.append(f"::{level} file={c.path},line={c.line}::{_escape(message)}")
    return out


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def markdown(impact: Impact, *, limit: int = 60_000, heading: str = "###") -> str:
    """A pull-request section: counts, then each definition that needs reading with its sites, diffs folded.

    Cut to ``limit`` characters (GitHub's body limit is 65,536): the diffs go first, then the sites.
    """
    counts = impact.counts()
    head = [
        f"{heading} What vLLM {impact.old} -> {impact.new} does to the tree's couplings",
        "",
        "| " + " | ".join(changes.STATUSES) + " |",
        "|" + "---|" * len(changes.STATUSES),
        "| " + " | ".join(str(counts[s]) for s in changes.STATUSES) + " |",
        "",
        f"Kinds: {', '.join(f'{sum(c.kind == k for c in impact.couplings)} {k}' for k in KINDS)}; "
        f"read from both releases' own files (`balance-patchgen impact`, docs/impact.md).",
    ]
    needs = _needs_reading(impact)
    for with_diffs in (True, False):
        body = list(head)
        for name, status, used in needs:
            symbol = impact.symbols.get(name)
            said = _describe(used[0], impact)
            body.append("")
            body.append(f"- **{status}** `{name}`" + (f": {said}" if said else ""))
            shown = ", ".join(f"`{c.site}` ({c.kind})" for c in used[:8])
            body.append(f"  - used at {shown}" + (f" and {len(used) - 8} more" if len(used) > 8 else ""))
            if with_diffs and symbol is not None and symbol.change.diff:
                body += ["  <details><summary>upstream's diff</summary>", "", "  ```diff"]
                body += [f"  {line}" for line in symbol.change.diff.splitlines()]
                body += ["  ```", "  </details>"]
        text = "\n".join(body) + "\n"
        if len(text) <= limit:
            return text
    cut = text[: limit - 200].rsplit("\n- ", 1)[0]
    return cut + f"\n\n(cut at {limit} characters: `balance-patchgen impact --format json` has every coupling)\n"


def _needs_reading(impact: Impact) -> list[tuple[str, str, list[Coupling]]]:
    """Each vLLM name that is not unchanged, with its status and the couplings that use it, most urgent first."""
    sites: dict[tuple[str, str], list[Coupling]] = defaultdict(list)
    for c in impact.couplings:
        if c.status != changes.UNCHANGED:
            sites[(c.upstream, c.status)].append(c)  # a copy of a name can be redundant where a patch of it is not
    order = {s: n for n, s in enumerate(changes.STATUSES)}
    ranked = sorted(sites.items(), key=lambda item: (order[item[0][1]], item[0][0]))
    return [(name, status, used) for (name, status), used in ranked]


def summary_json(impact: Impact, *, sites: int = 20) -> dict[str, Any]:
    """What a bump's plan carries: counts, and each definition that needs reading with the sites using it."""
    out = []
    for name, status, used in _needs_reading(impact):
        symbol = impact.symbols.get(name)
        change = symbol.change if symbol is not None else None
        out.append(
            {
                "name": name,
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
    return {"from": impact.old, "to": impact.new, "counts": impact.counts(), "kinds": kinds, "symbols": out}


def bump_lines(impact: Impact, *, listed: int = 40) -> list[str]:
    """What ``bump`` prints: the counts, then the definitions that need reading, the most urgent first."""
    out = summary_lines(impact, where=False)[:2]
    needs = _needs_reading(impact)
    for name, status, used in needs[:listed]:
        where = ", ".join(c.site for c in used[:3]) + (f" and {len(used) - 3} more" if len(used) > 3 else "")
        said = _describe(used[0], impact)
        out.append(f"  {status} {name}" + (f": {said}" if said else "") + f" (used at {where})")
    if len(needs) > listed:
        out.append(
            f"  ... and {len(needs) - listed} more: `balance-patchgen --root . impact --to {impact.new}` "
            "lists each with its sites"
        )
    return out

"""What ``explain`` writes: the groups of failing tests, ``breaks`` first, each with the couplings it hit and
upstream's diff of their definitions; as text, markdown (a pull request's comment), GitHub annotations at the
tree's line of each coupling, or JSON (``explain.schema.json``, shipped in the wheel)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from generator.judge.explain.explained import RANKS, Explained, Group

SCHEMA_VERSION = 1
_LEVELS = {"breaks": "error", "review": "warning", "info": "notice"}
_SHOWN_TESTS = 5


def _head(found: Explained) -> list[str]:
    counts = found.by_verdict()
    line = f"{found.failures} failing tests, {found.old} -> {found.new}: " + ", ".join(
        f"{counts[v]} on {v}" if v in RANKS[:3] else f"{counts[v]} {v}" for v in RANKS
    )
    more = []
    if found.theirs:
        more.append(f"{len(found.theirs)} failing at {found.old} too (the tree's own, not counted)")
    if found.strangers:
        more.append(f"{len(found.strangers)} test ids not in this tree (skipped: {found.strangers[0]}, ...)")
    return [line, *more]


def _hit(hit: Any, impact: Mapping[str, Any]) -> str:
    why = ""
    for c in impact.get("couplings", ()):
        if c["site"] == hit.site and c["upstream"] == hit.upstream:
            why = str(c.get("why") or "")
            break
    verdict = hit.verdict or "unjudged"
    return f"{hit.site} {hit.upstream} ({verdict}, {hit.status}; hit by {hit.rule}){': ' + why if why else ''}"


def text_lines(found: Explained, impact: Mapping[str, Any]) -> list[str]:
    out = _head(found)
    for group in found.groups():
        out.append("")
        out.append(f"[{group.verdict}] {len(group.tests)} tests: {group.error}")
        out += [f"  {_hit(h, impact)}" for h in group.hits]
        shown = ", ".join(group.tests[:_SHOWN_TESTS])
        out.append(f"  tests: {shown}{' ...' if len(group.tests) > _SHOWN_TESTS else ''}")
    return out


def _diff(upstream: str, impact: Mapping[str, Any]) -> str:
    symbol = (impact.get("symbols") or {}).get(upstream) or {}
    return str(symbol.get("diff") or "")


def markdown(found: Explained, impact: Mapping[str, Any], *, limit: int = 60_000) -> str:
    """A pull request's comment: the counts, then each group; upstream's diffs folded, and given up first
    (then the groups that do not fit, said) to stay under GitHub's 65,536 characters."""
    head = "\n".join(["### What the bump's failures hit", "", *(f"- {line}" for line in _head(found)), ""])
    for with_diffs in (True, False):
        parts = [head]
        left = 0
        for group in found.groups():
            block = _group_markdown(group, impact, with_diffs)
            if sum(map(len, parts)) + len(block) > limit:
                left += 1
                continue
            parts.append(block)
        if not left or not with_diffs:
            if left:
                parts.append(f"\n_{left} more groups do not fit here: `explain --format json` lists them all._\n")
            return "".join(parts)
    return head


def _group_markdown(group: Group, impact: Mapping[str, Any], with_diffs: bool) -> str:
    lines = [f"\n#### `{group.verdict}`: {len(group.tests)} tests: `{group.error}`\n"]
    for hit in group.hits:
        lines.append(f"- {_hit(hit, impact).replace(hit.site, f'`{hit.site}`', 1)}")
    lines.append(f"- tests: {', '.join(f'`{t}`' for t in group.tests[:_SHOWN_TESTS])}")
    if with_diffs:
        for upstream in dict.fromkeys(h.upstream for h in group.hits):
            if diff := _diff(upstream, impact):
                lines.append(
                    f"\n<details><summary>upstream's diff of {upstream}</summary>\n\n```diff\n{diff}```\n</details>"
                )
    return "\n".join(lines) + "\n"


def github_lines(found: Explained, impact: Mapping[str, Any]) -> list[str]:
    """One annotation per coupling a group hit, at the tree's line of it (``::error`` for breaks first)."""
    seen: dict[tuple[str, str], tuple[str, int, str]] = {}
    for group in found.groups():
        for hit in group.hits:
            key = (hit.site, hit.upstream)
            before = seen.get(key)
            seen[key] = (group.verdict, (before[1] if before else 0) + len(group.tests), group.error)
    out = []
    for (site, upstream), (verdict, tests, error) in sorted(
        seen.items(), key=lambda item: (RANKS.index(item[1][0]), item[0])
    ):
        path, _, line = site.rpartition(":")
        level = _LEVELS.get(verdict, "notice")
        message = f"{tests} failing tests hit {upstream} ({verdict}): {error}".replace("\n", " ")
        out.append(f"::{level} file={path},line={line},title=vLLM bump::{message}")
    return out


def to_json(found: Explained) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "from": found.old,
        "to": found.new,
        "failures": found.failures,
        "by_verdict": found.by_verdict(),
        "groups": [
            {
                "tests": len(g.tests),
                "error": g.error,
                "verdict": g.verdict,
                "couplings": [
                    {"site": h.site, "upstream": h.upstream, "verdict": h.verdict, "status": h.status, "rule": h.rule}
                    for h in g.hits
                ],
                "test_ids": list(g.tests),
            }
            for g in found.groups()
        ],
        "theirs": [{"test": o.test, "error": o.error} for o in found.theirs],
        "not_in_tree": {"tests": len(found.strangers), "first": found.strangers[:20]},
    }


def to_json_text(found: Explained) -> str:
    return json.dumps(to_json(found), indent=1) + "\n"

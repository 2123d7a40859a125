"""What ``adapt`` did and what it left: text lines, the exit's one line, and a plan's JSON and Markdown.

Deterministic: by site, and in JSON and Markdown what is left by impact's verdict (breaks, review, info,
then what impact gives none for).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from generator.errors import WorkLeft
from generator.tree.adapt.plan import Leftover, Plan

VERDICT_ORDER = ("breaks", "review", "info", "")
# Where a plan's reader finds the diff a pull request body had to cut (docs/pin-bump.md, "The plan").
DIFF_FIELD = "adapt.diff"


def lines(plan: Plan, *, written: bool) -> list[str]:
    verb = "wrote" if written else "would write"
    out = [
        f"adapt {plan.old} -> {plan.new}: {verb} {len(plan.write)} files: {len(plan.renamed)} names rewritten, "
        f"{len(plan.merged)} copies re-synced, {len(plan.followed)} signatures followed, {_gates(plan)}; "
        f"{len(plan.left)} left ({len(plan.work)} for a "
        f"person); {plan.skipped} files skipped"
    ]
    for path, rewrite in sorted(plan.renamed, key=lambda r: (r[0], r[1].line, r[1].old)):
        out.append(f"  renamed {path}:{rewrite.line} {rewrite.kind} {rewrite.old} -> {rewrite.new}")
    for path, outcome in sorted(plan.merged, key=lambda m: (m[0], m[1].line)):
        out.append(f"  re-synced {path}:{outcome.line} {outcome.upstream} (now {plan.new}'s with the tree's edits)")
        out += [f"    added `{statement}`: {plan.new}'s function reads it" for statement in outcome.imports]
    for _, followed in sorted(plan.followed, key=lambda f: f[1].site):
        out.append(f"  followed {followed.site} {followed.upstream} (B's signature):")
        out += [f"    {edit}" for edit in followed.edits]
    for left in _by_site(plan.left):
        verdict = f" (impact: {left.verdict})" if left.verdict else ""
        out.append(f"  left {left.kind} {left.site} {left.upstream}: {left.why}{verdict}".rstrip())
        out += [f"    {line}" for line in left.detail.splitlines()]
    return out


def _gates(plan: Plan) -> str:
    written = sum(n for _, n in plan.gated)
    return f"{written} gates written, {len(plan.retired)} dead gates retired ({plan.live_gates} live kept)"


def work_left(plan: Plan, *, written: bool = True) -> WorkLeft | None:
    """The one line ``adapt`` exits 1 with when a person has work left (None: nothing is); a dry run
    says what the real run would have written."""
    work = plan.work
    if not work:
        return None
    kinds: dict[str, int] = {}
    for left in work:
        kinds[left.kind] = kinds.get(left.kind, 0) + 1
    counted = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    return WorkLeft(
        f"adapt {plan.old} -> {plan.new} {'wrote' if written else 'would write'} what it could and left "
        f"{len(work)} for a person ({counted}; "
        "listed above as `left`): resolve them in the tree, then run `impact` again"
    )


def _by_site(left: Sequence[Leftover]) -> list[Leftover]:
    return sorted(left, key=lambda x: (x.site, x.kind, x.upstream))


def _by_verdict(left: Sequence[Leftover]) -> list[Leftover]:
    return sorted(left, key=lambda x: (VERDICT_ORDER.index(x.verdict), not x.is_work, x.site, x.kind, x.upstream))


def to_json(plan: Plan, diff: str) -> dict[str, Any]:
    """A plan's ``adapt`` field (``generator/pins/plan.schema.json``): what it writes, what is left, the diff."""
    return {
        "from": plan.old,
        "to": plan.new,
        "files": sorted(
            {path for path, _ in plan.renamed}
            | {path for path, _ in plan.merged}
            | {p for p, _ in plan.retired}
            | {p for p, _ in plan.followed}
        ),
        "counts": {
            "files": len(plan.write),
            "renamed": len(plan.renamed),
            "merged": len(plan.merged),
            "followed": len(plan.followed),
            "gates_written": sum(n for _, n in plan.gated),
            "gates_retired": len(plan.retired),
            "left": len(plan.left),
            "work": len(plan.work),
            "skipped": plan.skipped,
        },
        "renamed": [
            {"site": f"{path}:{r.line}", "kind": r.kind, "old": r.old, "new": r.new}
            for path, r in sorted(plan.renamed, key=lambda r: (r[0], r[1].line, r[1].old))
        ],
        "merged": [
            {"site": f"{path}:{o.line}", "upstream": o.upstream, "imports": list(o.imports)}
            for path, o in sorted(plan.merged, key=lambda m: (m[0], m[1].line))
        ],
        "followed": [
            {"site": f.site, "upstream": f.upstream, "edits": list(f.edits)}
            for _, f in sorted(plan.followed, key=lambda f: f[1].site)
        ],
        "left": [
            {
                "site": x.site,
                "kind": x.kind,
                "upstream": x.upstream,
                "why": x.why,
                "verdict": x.verdict or None,
                "work": x.is_work,
                "detail": x.detail,
            }
            for x in _by_verdict(plan.left)
        ],
        "diff": diff,
    }


def markdown(plan: Plan, diff: str, *, limit: int) -> str:
    """The pull request body's section: counts, what is left by verdict, the diff folded; at most ``limit``."""
    head = (
        f"### What `adapt` wrote ({plan.old} -> {plan.new})\n\n"
        f"{len(plan.write)} files: {len(plan.renamed)} moved names rewritten, {len(plan.merged)} copies "
        f"re-synced with {plan.new}'s function (each passed the independent check), {len(plan.followed)} "
        f"functions given {plan.new}'s signature of what they replace, {_gates(plan)}. "
        f"{len(plan.left)} left, {len(plan.work)} of them work for a person"
        + (" (the command exits 1: docs/adapt.md)." if plan.work else ".")
    )
    items = []
    for verdict in VERDICT_ORDER:
        group = [x for x in _by_verdict(plan.left) if x.verdict == verdict]
        if group:
            items.append(f"\n**{verdict or 'no verdict'}**\n")
            items += [_item(x) for x in group]
    listing = "\n".join(items)
    budget = limit - len(head) - 600
    if len(listing) > budget // 2:
        cut = listing[: budget // 2].rsplit("\n", 1)[0]
        more = listing.count("\n- ") - cut.count("\n- ")
        listing = f"{cut}\n\n({more} more: the plan's `adapt.left`)"
    text = f"{head}\n{listing}\n" if listing else f"{head}\n"
    if not diff:
        return text
    room = limit - len(text) - 400
    shown = diff
    if len(shown) > room:
        shown = diff[: max(room, 0)].rsplit("\n", 1)[0] + "\n" if room > 0 else ""
        dropped = diff.count("\n") - shown.count("\n")
        note = (
            f"\n({dropped} more lines cut to fit GitHub's limit: the whole diff is the plan's `{DIFF_FIELD}` "
            f"field, or `balance-patchgen --root . adapt --from {plan.old} --to {plan.new} --dry-run`)\n"
        )
    else:
        note = ""
    summary = f"the diff adapt writes ({diff.count(chr(10))} lines)"
    return f"{text}\n<details><summary>{summary}</summary>\n\n{_fenced(shown, 'diff')}\n{note}\n</details>\n"


def _item(left: Leftover) -> str:
    upstream = f" `{left.upstream}`" if left.upstream else ""
    return f"- {'**to do** ' if left.is_work else ''}{left.kind} `{left.site}`{upstream}: {left.why}"


def _fenced(text: str, language: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip(chr(10))}\n{fence}"

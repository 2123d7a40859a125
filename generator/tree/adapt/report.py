"""What ``adapt`` did and what it left, as text lines (deterministic: by site)."""

from __future__ import annotations

from generator.tree.adapt.plan import Plan


def lines(plan: Plan, *, written: bool) -> list[str]:
    verb = "wrote" if written else "would write"
    out = [
        f"adapt {plan.old} -> {plan.new}: {verb} {len(plan.write)} files: {len(plan.renamed)} names rewritten, "
        f"{len(plan.merged)} copies re-synced; {len(plan.left)} left; {plan.skipped} files skipped"
    ]
    for path, rewrite in sorted(plan.renamed, key=lambda r: (r[0], r[1].line, r[1].old)):
        out.append(f"  renamed {path}:{rewrite.line} {rewrite.kind} {rewrite.old} -> {rewrite.new}")
    for path, outcome in sorted(plan.merged, key=lambda m: (m[0], m[1].line)):
        out.append(f"  re-synced {path}:{outcome.line} {outcome.upstream} (now {plan.new}'s with the tree's edits)")
    for left in sorted(plan.left, key=lambda x: (x.site, x.kind, x.upstream)):
        out.append(f"  left {left.kind} {left.site} {left.upstream}: {left.why}".rstrip())
        out += [f"    {line}" for line in left.detail.splitlines()]
    return out

"""Each copy whose upstream function changed from A to B: what the maintainers did, what ``adapt`` did.

A copy is a function of P_A (its file and qualified name) and the vLLM function it copies, at A and
at B. The maintainers *re-synced* it when P_B's function (same file, same qualified name) differs
from P_A's; they *left it stale* when it is P_A's; it is *gone* when P_B has no such function. What
``adapt`` did is what its report says (re-synced, conflict) and what its tree holds. Functions are
equal when their statement keys are (``statements.plain``: formatting, comments, docstrings aside). What
``adapt`` is held to starts from the copy with the gates B makes dead retired (``gates``), which the bump does.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from balance_dev.adapt_history import gates, statements
from balance_dev.adapt_history.statements import Located


@dataclass(frozen=True)
class CopyInput:
    file: str
    line: int  # the copy's ``def`` line in P_A, as impact and adapt's report name it
    upstream: str
    base: ast.AST  # the vLLM function at A
    theirs: ast.AST  # at B
    p_a: ast.Module
    p_b: ast.Module | None  # None: P_B has no such file
    adapted: ast.Module
    reported: str | None  # adapt's report for the copy: re-synced | conflict | None (not named)
    to: str = ""  # release B (``v0.29.0``): the copy's gates dead there are retired with the bump (gates.py)


@dataclass
class CopyRow:
    file: str
    qualname: str
    upstream: str
    maintainers: str  # re-synced | stale | gone
    adapt: str  # re-synced | conflict | untouched | changed-unreported
    equal_to_maintainers: bool | None  # re-synced by the maintainers: is adapt's function P_B's
    taken: int = 0  # upstream statements P_B took into the copy
    held: int = 0  # of those, what adapt's copy holds too
    check: statements.Check | None = None  # adapt re-synced or changed the copy: the independent re-check
    unchanged: bool = False  # adapt re-synced it to what it was (the copy held B's changes already)
    problems: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "file": self.file,
            "qualname": self.qualname,
            "upstream": self.upstream,
            "maintainers": self.maintainers,
            "adapt": self.adapt,
            "equal_to_maintainers": self.equal_to_maintainers,
            "taken": self.taken,
            "held": self.held,
        }
        if self.check is not None:
            out["check"] = {
                "holds": self.check.holds,
                "unchanged": self.unchanged,
                "missing_upstream": len(self.check.missing_upstream),
                "kept_removed": len(self.check.kept_removed),
                "missing_own": len(self.check.missing_own),
                "undone_own": len(self.check.undone_own),
                "other": len(self.check.other),
            }
        if self.problems:
            out["problems"] = self.problems
        return out


def judge(copy: CopyInput) -> CopyRow | None:
    """The copy's row; None when its upstream function did not change (statement keys) or P_A has no def there."""
    if statements.plain(copy.base) == statements.plain(copy.theirs):
        return None
    found = statements.at_line(copy.p_a, copy.line)
    if found is None:
        return None
    ours = statements.keys(found.node)
    # what adapt starts from: the copy with the version gates B makes dead retired (adapt's gates part)
    start = statements.keys(gates.folded(found.node, copy.to)) if copy.to else ours
    theirs_b = _pair(copy.p_b, found)
    adapted = _pair(copy.adapted, found)
    problems: list[str] = []
    if adapted is None:
        problems.append("adapt's tree has no such function")
    if theirs_b is None:
        maintainers = "gone"
    elif statements.plain(theirs_b.node) != tuple(ours):
        maintainers = "re-synced"
    else:
        maintainers = "stale"
    result = statements.keys(adapted.node) if adapted is not None else ours
    changed = result not in (ours, start)
    if copy.reported in ("re-synced", "conflict"):
        action = copy.reported
    else:
        action = "changed-unreported" if changed else "untouched"
    if copy.reported == "conflict" and changed:
        problems.append("reported as a conflict, yet adapt's function differs from P_A's")
    row = CopyRow(copy.file, found.qualname, copy.upstream, maintainers, action, None, problems=problems)
    base, theirs = statements.keys(copy.base), statements.keys(copy.theirs)
    if theirs_b is not None and maintainers == "re-synced":
        new = statements.keys(theirs_b.node)
        row.equal_to_maintainers = tuple(result) == tuple(new)
        wanted = statements.taken(base, theirs, ours, new)
        row.taken = sum(wanted.values())
        row.held = statements.held(wanted, ours, result)
    if changed or action == "re-synced":
        # A merge may equal the copy: it held B's changes already. The check says whether it does.
        row.check = statements.check(base, start, theirs, result)
        row.unchanged = not changed
    return row


def _pair(tree: ast.Module | None, found: Located) -> Located | None:
    return None if tree is None else statements.named(tree, found.qualname, found.index)


def summary(rows: Iterable[CopyRow]) -> dict[str, Any]:
    """The counts the table shows: by what the maintainers did, what adapt did, and the statement-level goal."""
    rows = list(rows)
    resynced = [r for r in rows if r.maintainers == "re-synced"]
    stale = [r for r in rows if r.maintainers == "stale"]
    written = [r for r in rows if r.check is not None]
    return {
        "upstream_changed": len(rows),
        "adapt": dict(sorted(Counter(r.adapt for r in rows).items())),
        "maintainers_resynced": {
            "total": len(resynced),
            "adapt_equal": sum(1 for r in resynced if r.equal_to_maintainers),
            "adapt_conflict": sum(1 for r in resynced if r.adapt == "conflict"),
            "adapt_other": sum(1 for r in resynced if not r.equal_to_maintainers and r.adapt != "conflict"),
        },
        "statements": {
            "taken": sum(r.taken for r in resynced),
            "held": sum(r.held for r in resynced),
            "in_conflict": sum(r.taken - r.held for r in resynced if r.adapt == "conflict"),
            "missing": sum(r.taken - r.held for r in resynced if r.adapt != "conflict"),
        },
        "maintainers_stale": {
            "total": len(stale),
            "adapt_resynced": sum(1 for r in stale if r.adapt == "re-synced"),
            "adapt_conflict": sum(1 for r in stale if r.adapt == "conflict"),
            "adapt_other": sum(1 for r in stale if r.adapt not in ("re-synced", "conflict")),
        },
        "maintainers_gone": sum(1 for r in rows if r.maintainers == "gone"),
        "adapt_written": {
            "total": len(written),
            "holds": sum(1 for r in written if r.check is not None and r.check.holds),
            "unchanged": sum(1 for r in written if r.unchanged),
        },
        "problems": sum(len(r.problems) for r in rows),
    }

"""Signatures against the maintainers' next release: for each override whose vLLM method B changed the
parameters of, what the maintainers' P_B did to it and what ``adapt`` wrote, compared as B's callers see them.

Read here with stdlib ``ast`` from the three trees' files and both releases' function (nothing of the tool's):
B's change is the parameters B added or renamed (their names and, for positional ones, their places), and a
function follows it when it takes each of them where B does. Adapt's signature and the maintainers' take the
same calls when they agree on every one of those parameters (both take it at the same place, or neither).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _params(node: Function) -> list[str]:
    return [a.arg for a in (*node.args.posonlyargs, *node.args.args)] + [a.arg for a in node.args.kwonlyargs]


def _positional(node: Function) -> list[str]:
    return [a.arg for a in (*node.args.posonlyargs, *node.args.args)]


def changed_by_b(old: Function, new: Function) -> list[str]:
    """The parameters B has and A had not (added, or a rename's new name)."""
    before = set(_params(old))
    return [p for p in _params(new) if p not in before]


def _where(node: Function | None, name: str) -> str:
    """How ``node`` takes ``name``: ``@i`` (positional, place i), ``kw``, ``**`` (any keyword), or ``-``."""
    if node is None:
        return "-"
    positional = _positional(node)
    if name in positional:
        return f"@{positional.index(name)}"
    if name in {a.arg for a in node.args.kwonlyargs}:
        return "kw"
    return "**" if node.args.kwarg is not None else "-"


def function_at(tree: ast.Module | None, qualname: str) -> Function | None:
    """The def of ``Class.method`` (or ``function``) at the file's top or in a top-level class."""
    if tree is None:
        return None
    head, _, rest = qualname.partition(".")
    for node in tree.body:
        if rest and isinstance(node, ast.ClassDef) and node.name == head:
            return next((n for n in node.body if isinstance(n, Function) and n.name == rest), None)
        if not rest and isinstance(node, Function) and node.name == head:
            return node
    return None


@dataclass(frozen=True)
class Row:
    site: str
    qualname: str
    upstream: str
    b_added: tuple[str, ...]
    maintainers: tuple[str, ...]  # how P_B takes each of B's parameters (``_where``)
    adapt: tuple[str, ...]
    at_a: tuple[str, ...]

    @property
    def maintainers_changed(self) -> bool:
        return self.maintainers != self.at_a

    @property
    def adapt_changed(self) -> bool:
        return self.adapt != self.at_a

    @property
    def same_calls(self) -> bool:
        return self.maintainers == self.adapt

    def as_json(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "qualname": self.qualname,
            "upstream": self.upstream,
            "b_added": list(self.b_added),
            "maintainers": list(self.maintainers),
            "adapt": list(self.adapt),
            "at_a": list(self.at_a),
            "same_calls": self.same_calls,
        }


def judge(
    site: str,
    upstream: str,
    old: Function,
    new: Function,
    trees: tuple[ast.Module | None, ast.Module | None, ast.Module | None],
    qualname: str,
) -> Row | None:
    """The override at ``site`` (``qualname`` in P_A's file) in P_A, P_B and the adapted tree; None when B
    added nothing, or P_B has no such function (gone, moved: nothing to compare)."""
    added = changed_by_b(old, new)
    p_a, p_b, adapted = (function_at(t, qualname) for t in trees)
    if not added or p_a is None or p_b is None:
        return None
    return Row(
        site,
        qualname,
        upstream,
        tuple(added),
        tuple(_where(p_b, n) for n in added),
        tuple(_where(adapted, n) for n in added),
        tuple(_where(p_a, n) for n in added),
    )


def summary(rows: list[Row]) -> dict[str, int]:
    """Of the overrides whose method B changed: those the maintainers changed, and of them those adapt's
    signature takes the same calls for; and those adapt changed the maintainers left."""
    theirs = [r for r in rows if r.maintainers_changed]
    return {
        "b_changed": len(rows),
        "maintainers_changed": len(theirs),
        "adapt_same_calls": sum(1 for r in theirs if r.same_calls),
        "adapt_changed_where_maintainers_did_not": sum(
            1 for r in rows if r.adapt_changed and not r.maintainers_changed
        ),
    }

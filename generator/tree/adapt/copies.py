"""Stale copies re-synced in one file's text: each copy's function replaced by its three-way merge.

The texts come from the tree's file (ours) and from the two releases' files (A's and B's function,
decorators included); ``judge.resync`` decides. A copy whose result is anything but ``Merged``
stays byte for byte as it was.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from generator.judge.resync import Conflict, Merged, Result, resync
from generator.tree.adapt import fits


@dataclass(frozen=True)
class CopyJob:
    """One copy to re-sync: where it starts in the tree's file, and upstream's function at A and B."""

    line: int  # the copy's ``def`` (or first decorator) line, as ``impact`` reports it
    upstream: str  # the vLLM function's name, for the report
    base: str
    theirs: str
    # B's class of a copied method: the names its lineage binds at class level, and what its methods assign
    # on self (None: not a method, or B's class is not read)
    members: frozenset[str] | None = None
    assigned: frozenset[str] = frozenset()
    owner: str = ""  # B's class's own name: does the tree's class derive from it, or copy it


@dataclass(frozen=True)
class CopyOutcome:
    line: int
    upstream: str
    result: Result


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def function_span(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.AST) -> tuple[int, int]:
    """A def's first line (its first decorator's) and last line, 1-based."""
    decorators = getattr(node, "decorator_list", None) or []
    first = min([int(getattr(node, "lineno", 0)), *(d.lineno for d in decorators)])
    last: int = getattr(node, "end_lineno", None) or first
    return first, last


def function_text(lines: Sequence[str], node: ast.AST) -> str:
    first, last = function_span(node)
    return "".join(lines[first - 1 : last])


def resync_file(text: str, jobs: Sequence[CopyJob]) -> tuple[str, list[CopyOutcome]]:
    """``text`` with every copy that merged replaced; one outcome per job, in the jobs' order."""
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    by_line: dict[int, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for func in _functions(tree):
        by_line.setdefault(func.lineno, func)
        by_line.setdefault(function_span(func)[0], func)
    outcomes: list[CopyOutcome] = []
    replaced: list[tuple[int, int, str]] = []
    for job in jobs:
        found = by_line.get(job.line)
        if found is None:
            outcomes.append(CopyOutcome(job.line, job.upstream, Conflict(f"no function starts at line {job.line}")))
            continue
        func = found
        ours = function_text(lines, func)
        result = resync(job.base, ours, job.theirs)
        if isinstance(result, Merged) and (
            why := fits.problem(tree, func, ours, result.text, job.members, job.assigned, job.owner)
        ):
            result = Conflict(f"merge refused where the copy lives: {why}")
        outcomes.append(CopyOutcome(job.line, job.upstream, result))
        if isinstance(result, Merged):
            replaced.append((*function_span(func), result.text))
    # Bottom up, so each span's line numbers still hold when it is replaced.
    for first, last, new in sorted(replaced, reverse=True):
        lines[first - 1 : last] = new.splitlines(keepends=True)
    return "".join(lines), outcomes

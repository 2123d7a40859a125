"""Where a coupling's code runs, read from the tree's own source: the lines a traceback frame must be in.

``import`` and ``patch``: the statement at the site (a patch whose value is a function of the same file:
that function too, since the failure comes when it runs); ``copy`` and ``override``: the whole function
whose ``def`` (or decorator) is at the site; ``declared``: nothing (a registry comment runs nowhere).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Scope:
    path: str
    spans: tuple[tuple[int, int], ...]  # inclusive line ranges
    qualname: str = ""  # the tree's function at the site (Class.method), for a copy or an override
    body: tuple[int, int] | None = None  # that function's body: what runs when it is called, not when defined

    def holds(self, path: str, line: int) -> bool:
        return path == self.path and any(first <= line <= last for first, last in self.spans)


@cache
def _parsed(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def _functions(module: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, FUNCTIONS):
                out.append((f"{prefix}{child.name}", child))
                walk(child, f"{prefix}{child.name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(module, "")
    return out


@cache
def _functions_at(path: Path) -> tuple[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef], ...]:
    module = _parsed(path)
    return tuple(_functions(module)) if module is not None else ()


@cache
def _statements(path: Path) -> tuple[ast.stmt, ...]:
    module = _parsed(path)
    return tuple(n for n in ast.walk(module) if isinstance(n, ast.stmt)) if module is not None else ()


def _span(node: ast.AST) -> tuple[int, int]:
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])  # type: ignore[attr-defined]
    return first, node.end_lineno or node.lineno  # type: ignore[attr-defined]


def _length(node: ast.stmt) -> int:
    return (node.end_lineno or node.lineno) - node.lineno


@cache
def _innermost(path: Path) -> dict[int, ast.stmt]:
    """Each line of the file -> the innermost statement holding it (the shortest; of two alike, the later)."""
    out: dict[int, ast.stmt] = {}
    for node in _statements(path):
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            best = out.get(line)
            if best is None or _length(node) <= _length(best):
                out[line] = node
    return out


def _statement_at(path: Path, line: int) -> ast.stmt | None:
    """The innermost statement whose lines hold ``line``."""
    return _innermost(path).get(line)


def scope_of(root: Path, kind: str, site: str) -> Scope:
    path, _, line_text = site.rpartition(":")
    line = int(line_text)
    module = _parsed(root / path)
    if module is None or kind == "declared":
        return Scope(path, ())
    if kind in ("copy", "override"):
        for qualname, func in _functions_at(root / path):
            first, last = _span(func)
            if first <= line <= func.body[0].lineno - 1 or line == func.lineno:
                return Scope(path, ((first, last),), qualname, (func.body[0].lineno, last))
        return Scope(path, ((line, line),))
    statement = _statement_at(root / path, line)
    if statement is None:
        return Scope(path, ((line, line),))
    spans = [(statement.lineno, statement.end_lineno or statement.lineno)]
    if kind == "patch" and isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Name):
        named = statement.value.id
        spans += [_span(func) for qualname, func in _functions_at(root / path) if qualname.rsplit(".", 1)[-1] == named]
    return Scope(path, tuple(sorted(set(spans))))

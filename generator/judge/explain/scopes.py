"""Where a coupling's code runs, read from the tree's own source: the lines a traceback frame must be in.

``import`` and ``patch``: the statement at the site (a patch whose value is a function of the same file:
that function too, since the failure comes when it runs); ``copy`` and ``override``: the whole function
whose ``def`` (or decorator) is at the site; ``declared``: nothing (a registry comment runs nowhere).

A file is read once into its outline (its functions' and statements' lines), kept in the cache by the
file's digest (``filepack``): a warm ``explain`` parses no file it has read before.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from generator.judge.explain.filepack import FilePack

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_OUTLINES = "explain-outlines-1"  # the pack's name: bumped when ``Outline`` changes shape


@dataclass(frozen=True)
class Scope:
    path: str
    spans: tuple[tuple[int, int], ...]  # inclusive line ranges
    qualname: str = ""  # the tree's function at the site (Class.method), for a copy or an override
    body: tuple[int, int] | None = None  # that function's body: what runs when it is called, not when defined

    def holds(self, path: str, line: int) -> bool:
        return path == self.path and any(first <= line <= last for first, last in self.spans)


@dataclass(frozen=True)
class Function:
    qualname: str
    first: int  # its first decorator's line, or its ``def``'s
    last: int
    line: int  # its ``def``
    body: int  # its body's first line


@dataclass(frozen=True)
class Outline:
    """What a scope reads of a file: its functions, and each line's innermost statement (the shortest holding
    it; of two alike, the later) as (first, last, the name ``x = name`` assigns, or "")."""

    functions: tuple[Function, ...]
    innermost: dict[int, tuple[int, int, str]]


def _outline(module: ast.Module) -> Outline:
    functions: list[Function] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, FUNCTIONS):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                last = child.end_lineno or child.lineno
                functions.append(Function(f"{prefix}{child.name}", first, last, child.lineno, child.body[0].lineno))
                walk(child, f"{prefix}{child.name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(module, "")
    innermost: dict[int, tuple[int, int, str]] = {}
    for node in ast.walk(module):
        if not isinstance(node, ast.stmt):
            continue
        first, last = node.lineno, node.end_lineno or node.lineno
        assigned = node.value.id if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) else ""
        for line in range(first, last + 1):
            best = innermost.get(line)
            if best is None or last - first <= best[1] - best[0]:
                innermost[line] = (first, last, assigned)
    return Outline(tuple(functions), innermost)


def _read(data: bytes, path: str) -> Outline | None:
    try:
        return _outline(ast.parse(data, filename=path))
    except (SyntaxError, ValueError):
        return None


def outlines(root: Path) -> FilePack[Outline]:
    """The outlines of one tree's files, read when first asked, by the digest of each file's bytes."""
    return FilePack(_OUTLINES, root, _read)


def scope_of(outlines: FilePack[Outline], kind: str, site: str) -> Scope:
    path, _, line_text = site.rpartition(":")
    line = int(line_text)
    outline = outlines.get(path)
    if outline is None or kind == "declared":
        return Scope(path, ())
    if kind in ("copy", "override"):
        for func in outline.functions:
            if func.first <= line <= func.body - 1 or line == func.line:
                return Scope(path, ((func.first, func.last),), func.qualname, (func.body, func.last))
        return Scope(path, ((line, line),))
    statement = outline.innermost.get(line)
    if statement is None:
        return Scope(path, ((line, line),))
    first, last, assigned = statement
    spans: Iterable[tuple[int, int]] = [(first, last)]
    if kind == "patch" and assigned:
        spans = [*spans, *((f.first, f.last) for f in outline.functions if f.qualname.rsplit(".", 1)[-1] == assigned)]
    return Scope(path, tuple(sorted(set(spans))))

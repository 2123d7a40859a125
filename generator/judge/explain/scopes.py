"""Where a coupling's code runs, read from the tree's own source: the lines a traceback frame must be in.

``import`` and ``patch``: the statement at the site (a patch whose value is a function of the same file:
that function too, since the failure comes when it runs); ``copy`` and ``override``: the whole function
whose ``def`` (or decorator) is at the site; ``declared``: nothing (a registry comment runs nowhere).

A file is read once into its outline (its functions' and statements' lines), kept in the cache by the
file's digest: a warm ``explain`` parses no file it has read before.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import pickle
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from generator.sources import cache

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_OUTLINES = "explain-outlines-1"  # the pack's name: bumped when ``Outline`` changes shape
_KEPT = 8192  # outlines a pack holds before the ones this run did not read are dropped


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


class Outlines:
    """The outlines of one tree's files, read when first asked, by the digest of each file's bytes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._by_path: dict[str, Outline | None] = {}
        where = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
        self._pack = cache.cache_root() / _OUTLINES / f"{where}.pickle"
        self._known: dict[str, Outline] | None = None
        self._added = False

    def get(self, path: str) -> Outline | None:
        if path not in self._by_path:
            self._by_path[path] = self._read(path)
        return self._by_path[path]

    def _read(self, path: str) -> Outline | None:
        try:
            data = (self.root / path).read_bytes()
        except OSError:
            return None
        digest = hashlib.sha256(data).hexdigest()
        known = self._load()
        if digest in known:
            return known[digest]
        try:
            module = ast.parse(data, filename=path)
        except (SyntaxError, ValueError):
            return None
        known[digest] = outline = _outline(module)
        self._added = True
        return outline

    def _load(self) -> dict[str, Outline]:
        if self._known is None:
            self._known = {}
            data = cache.load_at(self._pack)
            if data is not None:
                try:
                    found = pickle.loads(data)
                except Exception:
                    found = None
                if isinstance(found, dict):
                    self._known = found
        return self._known

    def save(self) -> None:
        """Keep what was read for the next run (past a bound, only the files as this run read them)."""
        if not self._added:
            return
        known = self._load()
        if len(known) > _KEPT:
            now = {id(o) for o in self._by_path.values() if o is not None}
            known = {d: o for d, o in known.items() if id(o) in now}
        # a cache that cannot be written costs the next run its parsing, nothing else
        with contextlib.suppress(OSError):
            cache.store_at(self._pack, pickle.dumps(known, protocol=pickle.HIGHEST_PROTOCOL))
        self._added = False


def scope_of(outlines: Outlines, kind: str, site: str) -> Scope:
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

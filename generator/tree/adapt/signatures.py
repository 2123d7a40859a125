"""Which of the tree's functions follow B's signature (``follow``), and what B's own calls pass them.

A function qualifies when ``impact`` couples it to a vLLM function whose parameters B changed: an override
of a vLLM method, what a patch installs. A test's function (a fake of A's shape, the test's own business),
a function that is also a copy (re-synced whole: B's signature comes with it) and one the tree defines
nowhere ``impact`` can point at are not followed.

What B's calls pass is read once for every function asked (``calls.CallIndex``, the index ``impact`` reads
B's calls with): a parameter B added is taken only where one of B's calls of what the function replaces
passes it (by position when a call reaches its place); a subclass ``__init__`` is called as B constructs
the class.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from generator.judge.census import newer_syntax
from generator.judge.couplings import calls, changes, passing
from generator.judge.couplings.impact import Impact
from generator.judge.couplings.record import Coupling, is_test
from generator.judge.couplings.upstream import Definition, Resolver
from generator.tree.adapt import params
from generator.tree.adapt.follow import Target, occurrence


@dataclass(frozen=True)
class Asked:
    """One coupling whose function follows: the tree's file it is in, and where its ``def`` is."""

    coupling: Coupling
    path: str
    line: int
    change: changes.Change


def asked(impact: Impact) -> tuple[list[Asked], list[Coupling]]:
    """The couplings whose tree function follows B's signature, each once; and those with a changed signature
    that do not (a test's, a copy's, one whose function is not the tree's), for the generic report."""
    copies = {(c.path, c.line) for c in impact.couplings if c.kind == "copy"}
    out: list[Asked] = []
    others: list[Coupling] = []
    seen: set[tuple[str, int]] = set()
    for c in impact.couplings:
        symbol = impact.symbols.get(c.upstream)
        if c.kind not in ("override", "patch") or symbol is None or c.why:
            continue
        change = symbol.change_for(c.imports)
        if "signature" not in change.parts or not _functions(change):
            continue
        path, line = (c.path, c.line) if c.kind == "override" else _installed(c)
        if not path or is_test(path) or (path, line) in copies:
            others.append(c)
            continue
        if (path, line) not in seen:
            seen.add((path, line))
            out.append(Asked(c, path, line, change))
    return out, others


def _installed(c: Coupling) -> tuple[str, int]:
    return (c.installs.path, c.installs.line) if c.installs is not None and c.installs.kind != "lambda" else ("", 0)


def _functions(change: changes.Change) -> bool:
    return all(
        d is not None and isinstance(d.node, (ast.FunctionDef, ast.AsyncFunctionDef)) for d in (change.old, change.new)
    )


def targets(
    found: Iterable[Asked], root_texts: Mapping[str, str], b: Resolver, known: Mapping[str, passing.Passes]
) -> tuple[dict[str, list[Target]], list[tuple[Asked, str]]]:
    """The targets by file, with what B's calls pass each; and the couplings whose def is not found. A function
    with nothing to follow (it has none of the parameters B renamed or removed, takes what B added already) is
    no target. What B's calls pass is ``impact``'s reading (``known``, by B's canonical name); a definition it
    did not ask about is read here, by the same index."""
    parsed: dict[str, ast.Module | None] = {}
    todo: list[tuple[Asked, str, params.FunctionNode, params.Delta]] = []
    missing: list[tuple[Asked, str]] = []
    for a in found:
        old, new = a.change.old, a.change.new
        assert old is not None and new is not None
        assert isinstance(old.node, (ast.FunctionDef, ast.AsyncFunctionDef))
        assert isinstance(new.node, (ast.FunctionDef, ast.AsyncFunctionDef))
        delta = params.delta(old.node, new.node)
        if not delta:
            continue  # annotations or defaults alone: nothing a call binds differently
        if a.path not in parsed:
            parsed[a.path] = _parse(root_texts.get(a.path))
        at = _def_at(parsed[a.path], a.line)
        if at is None:
            missing.append((a, "its def is not found where impact points"))
            continue
        qualname, node = at
        if _has_work(delta, node):
            todo.append((a, qualname, node, delta))
    index = calls.CallIndex(b)
    asked = [a.change.new for a, _, node, delta in todo if _lacks(delta, node)]
    index.prepare({_asked_name(n) for n in asked if n is not None and n.name not in known} - {""})
    out: dict[str, list[Target]] = {}
    for a, qualname, node, delta in todo:
        new = a.change.new
        assert new is not None and isinstance(new.node, (ast.FunctionDef, ast.AsyncFunctionDef))
        n = occurrence(root_texts.get(a.path, ""), qualname, a.line)
        lacking = [p for p in delta.added if p.name in _lacks(delta, node)]
        patched = a.coupling.kind == "patch"
        owner = new.name.rpartition(".")[0] if "." in new.qualname else None
        got = known.get(new.name) or (passing.of(index, new, owner, patched) if lacking else None)
        passed = {p.name: how for p in lacking if got and (how := got.passed(p.name, p.index)) is not None}
        if not (delta.required or passed or _renames_or_drops(delta, node)):
            continue  # B's calls pass none of what it lacks: nothing at B needs an edit
        callee = _callee(new)
        out.setdefault(a.path, []).append(
            Target(qualname, n, a.coupling.site, a.coupling.upstream, delta, new.node, passed, callee, new.name)
        )
    return out, missing


def _parse(text: str | None) -> ast.Module | None:
    if text is None:
        return None
    try:
        return newer_syntax.parse(text, "<tree>")[0]
    except (SyntaxError, ValueError):
        return None


def _lacks(delta: params.Delta, node: params.FunctionNode) -> set[str]:
    """The parameters B added (with a default) that the tree's function neither has nor takes as a keyword."""
    if node.args.kwarg is not None:
        return set()
    have = {p.name for p in params.parameters(node)}
    return {p.name for p in delta.added if p.name not in have}


def _renames_or_drops(delta: params.Delta, node: params.FunctionNode) -> bool:
    have = {p.name for p in params.parameters(node)}
    return any(old in have for old, _ in delta.renamed) or any(name in have for name in delta.removed)


def _has_work(delta: params.Delta, node: params.FunctionNode) -> bool:
    return bool(delta.required or _renames_or_drops(delta, node) or _lacks(delta, node))


def _callee(d: Definition | None) -> str:
    return d.qualname.rpartition(".")[2] if d is not None else ""


def _asked_name(d: Definition | None) -> str:
    if d is None or "." not in d.qualname:
        return _callee(d)
    method = _callee(d)
    return d.qualname.split(".")[-2] if method == "__init__" else method


def _def_at(module: ast.Module | None, line: int) -> tuple[str, params.FunctionNode] | None:
    """The qualified name and node of the def whose ``def`` (or a decorator) is on ``line``."""
    if module is None:
        return None

    def walk(body: list[ast.stmt], prefix: str) -> tuple[str, params.FunctionNode] | None:
        for node in body:
            found: tuple[str, params.FunctionNode] | None = None
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if first <= line <= node.lineno:
                    return f"{prefix}{node.name}", node
                found = walk(node.body, f"{prefix}{node.name}.<locals>.")
            elif isinstance(node, ast.ClassDef):
                found = walk(node.body, f"{prefix}{node.name}.")
            else:
                found = walk([s for s in ast.iter_child_nodes(node) if isinstance(s, ast.stmt)], prefix)
                for h in ast.iter_child_nodes(node):
                    if isinstance(h, (ast.ExceptHandler, ast.match_case)):
                        found = found or walk(h.body, prefix)
            if found:
                return found
        return None

    return walk(module.body, "")


class Lookup:
    """What B and A define for the vLLM names a tree's file imports (``forwards.Lookup``)."""

    def __init__(self, a: Resolver, b: Resolver) -> None:
        self.a, self.b = a, b

    def newly(self, dotted: str, parameter: str) -> bool:
        """B changed the class's constructor as it changed the function calling it: what the function newly
        takes goes on to it."""
        return self._takes(self.b, dotted, parameter) and not self._takes(self.a, dotted, parameter)

    def reaches(self, dotted: str, method: str) -> str | None:
        found = self.b.defines(dotted, method)
        return found.name if found is not None else None

    @staticmethod
    def _takes(resolver: Resolver, dotted: str, parameter: str) -> bool:
        init = resolver.defines(dotted, "__init__")
        node = init.node if init is not None else None
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        return parameter in {p.name for p in params.parameters(node)}

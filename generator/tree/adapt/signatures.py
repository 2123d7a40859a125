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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from generator.judge.census import newer_syntax
from generator.judge.couplings import calls, changes
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
    found: Iterable[Asked], root_texts: Mapping[str, str], b: Resolver
) -> tuple[dict[str, list[Target]], list[tuple[Asked, str]]]:
    """The targets by file, with what B's calls pass each; and the couplings whose def is not found."""
    found = list(found)
    index = calls.CallIndex(b)
    index.prepare({_callee(a.change.new) for a in found} | {_owner_name(a.change.new) for a in found})
    out: dict[str, list[Target]] = {}
    missing: list[tuple[Asked, str]] = []
    for a in found:
        text = root_texts.get(a.path)
        old, new = a.change.old, a.change.new
        assert old is not None and new is not None
        assert isinstance(old.node, (ast.FunctionDef, ast.AsyncFunctionDef))
        assert isinstance(new.node, (ast.FunctionDef, ast.AsyncFunctionDef))
        delta = params.delta(old.node, new.node)
        if not delta:
            continue  # annotations or defaults alone: nothing a call binds differently
        qualname = _qualname_at(text, a.line) if text is not None else None
        if qualname is None:
            missing.append((a, "its def is not found where impact points"))
            continue
        n = occurrence(text or "", qualname, a.line)
        passed = _passed(index, b, new, a.coupling.kind == "patch", delta.added)
        callee = _callee(new)
        out.setdefault(a.path, []).append(
            Target(qualname, n, a.coupling.site, a.coupling.upstream, delta, new.node, passed, callee, new.name)
        )
    return out, missing


def _callee(d: Definition | None) -> str:
    return d.qualname.rpartition(".")[2] if d is not None else ""


def _owner_name(d: Definition | None) -> str:
    return d.qualname.split(".")[-2] if d is not None and "." in d.qualname else ""


def _qualname_at(text: str, line: int) -> str | None:
    """The qualified name of the def whose ``def`` (or a decorator) is on ``line``."""
    try:
        module = newer_syntax.parse(text, "<tree>")[0]
    except (SyntaxError, ValueError):
        return None

    def walk(body: list[ast.stmt], prefix: str) -> str | None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if first <= line <= node.lineno:
                    return f"{prefix}{node.name}"
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


def _kind(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    names = {d.id if isinstance(d, ast.Name) else getattr(d, "attr", "") for d in node.decorator_list}
    return "static" if "staticmethod" in names else "class" if "classmethod" in names else "plain"


def _passed(
    index: calls.CallIndex, b: Resolver, new: Definition, patched: bool, added: tuple[params.Parameter, ...]
) -> dict[str, bool]:
    """Each added parameter some call of B's own code passes: by position (True) or by keyword only (False)."""
    if not added:
        return {}
    node = new.node
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    method = "." in new.qualname
    owner = new.name.rpartition(".")[0] if method else None
    if new.qualname.endswith("__init__") and owner is not None:
        cls = b.resolve(owner)
        found = index.reaching(cls, None, False) if isinstance(cls, Definition) else []
        bound: Callable[[calls.CallOf], int] = lambda call: 1  # noqa: E731 (the instance is made, then bound)
    else:
        found = index.reaching(new, owner, patched)
        kind = _kind(node) if method else "static"
        bound = lambda call: 0 if kind == "static" else 1 if kind == "class" or call.form != calls.NAME else 0  # noqa: E731
    out: dict[str, bool] = {}
    for p in added:
        for call in found:
            reach = call.call.positional + bound(call)
            if call.call.star or reach > p.index >= 0:
                out[p.name] = True
                break
            if p.name in call.call.keywords or call.call.double_star:
                out[p.name] = False
    return out


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

"""The imports a merged copy needs where it lives: what B's module binds, bound the same way in the tree's file.

B's function reads the globals of B's module. When a merge brings in a statement reading one the tree's file
does not bind (``PreTrainedConfig`` in a new annotation, a helper B's module defines), the copy can only run
if the tree's file binds the same object: an import of it, from where B's module gets it (its own import's
source) or from B's module itself (a name it defines). Only a name B's module binds once, by a statement at
its top level, qualifies: one under an ``if``, a ``try`` or ``TYPE_CHECKING`` may be absent at run time, and a
name bound twice depends on the order of the module's statements. The rest stay a conflict (``fits``).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from generator.judge.census import newer_syntax
from generator.judge.couplings import inherited
from generator.judge.couplings.upstream import Definition, Resolver, bindings_of


def providers(resolver: Resolver, module: str) -> dict[str, str]:
    """For each name ``module`` binds once at its top level: the import statement that binds it in another file."""
    found = resolver.module(module)
    if found is None:
        return {}
    package = module if found.is_package else module.rpartition(".")[0]
    out: dict[str, str] = {}
    for name, node in _once_at_top(found.tree, found.bindings):
        statement = _statement(node, name, module, package)
        if statement is not None:
            out[name] = statement
    return out


class Bindings:
    """What B's modules and the tree's file bind names to, compared as B resolves them: vLLM's definitions by
    their canonical names, the tree's own (what it defines, or imports from elsewhere) by its module. Each name
    is resolved only when asked: a merge asks of the few its new statements use."""

    def __init__(self, resolver: Resolver, tree: ast.Module, module: str, *, package: bool = False) -> None:
        self._resolver = resolver
        self._tree = dict(_once_at_top(tree, bindings_of(tree.body)))
        self._module = module
        self._package = module if package else module.rpartition(".")[0]  # what its relative imports start from
        self._asked: dict[tuple[str, str], tuple[str, str] | None] = {}

    def differ(self, b_module: str, name: str) -> tuple[str, str] | None:
        """(what B's module binds ``name`` to, what the tree's file does) when both bind it once at their top
        and the two differ; None otherwise (the same, or not known: a third-party name in B's module)."""
        key = (b_module, name)
        if key not in self._asked:
            self._asked[key] = self._differ(b_module, name)
        return self._asked[key]

    def _differ(self, b_module: str, name: str) -> tuple[str, str] | None:
        found, node = self._resolver.module(b_module), self._tree.get(name)
        if found is None or node is None:
            return None
        nodes = found.bindings.get(name, [])
        if len(nodes) != 1 or not any(nodes[0] is stmt for stmt in found.tree.body):
            return None
        b_package = b_module if found.is_package else b_module.rpartition(".")[0]
        theirs = _origin(self._resolver, nodes[0], name, b_module, b_package)
        if not theirs:
            return None
        package = self._package
        ours = _origin(self._resolver, node, name, self._module, package)
        if not ours:  # the tree's own: what it defines, or imports from its modules or a third party
            statement = _statement(node, name, self._module, package) or ""
            ours = _dotted(statement) if statement.startswith("from ") else f"{self._module}.{name}"
        return (theirs, ours) if ours != theirs else None

    def vllm_class(self, name: str) -> VllmClass | None:
        """The vLLM class the tree's file binds ``name`` to, as B has it; None when it binds no class of B's."""
        node = self._tree.get(name)
        origin = _origin(self._resolver, node, name, self._module, self._package) if node is not None else ""
        found = self._resolver.resolve(origin) if origin else None
        if not isinstance(found, Definition) or found.kind != "class":
            return None
        members, assigned = inherited.provides(self._resolver, found)
        lineage = frozenset(d.name for d in inherited.lineage(self._resolver, found))
        return VllmClass(lineage, members | assigned)


@dataclass(frozen=True)
class VllmClass:
    """A vLLM class a tree's class derives from, at B: its canonical name and its bases', and what it gives its
    instances (the names its lineage binds at class level, what their ``__init__`` methods assign)."""

    lineage: frozenset[str]
    gives: frozenset[str]


def _once_at_top(tree: ast.Module, bindings: Mapping[str, Sequence[ast.AST]]) -> list[tuple[str, ast.AST]]:
    """The names a module binds once, by a statement at its top (not under an ``if`` or a ``try``); ``bindings``
    its ``bindings_of`` (the resolver keeps a vLLM module's)."""
    top = {id(stmt) for stmt in tree.body}
    return [(name, nodes[0]) for name, nodes in bindings.items() if len(nodes) == 1 and id(nodes[0]) in top]


def _origin(resolver: Resolver, node: ast.AST, name: str, module: str, package: str) -> str:
    statement = _statement(node, name, module, package)
    if statement is None or not statement.startswith("from "):
        return ""
    dotted = _dotted(statement)
    if dotted.split(".")[0] != "vllm":
        return ""
    found = resolver.resolve(dotted)
    return found.name if isinstance(found, Definition) else dotted


def _dotted(statement: str) -> str:
    """``from a.b import c as d`` -> ``a.b.c``: the object a from-import binds."""
    source, _, rest = statement.removeprefix("from ").partition(" import ")
    return f"{source}.{rest.split(' as ')[0]}"


def _statement(node: ast.AST, name: str, module: str, package: str) -> str | None:
    if isinstance(node, ast.ImportFrom):
        source = _absolute(node, package)
        alias = next((a for a in node.names if (a.asname or a.name) == name), None)
        if source is None or source == "__future__" or alias is None:
            return None
        return f"from {source} import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
    if isinstance(node, ast.Import):
        alias = next((a for a in node.names if (a.asname or a.name.split(".")[0]) == name), None)
        if alias is None:
            return None
        return f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)):
        return f"from {module} import {name}"
    return None


def _absolute(node: ast.ImportFrom, package: str) -> str | None:
    if not node.level:
        return node.module
    parts = package.split(".")
    if node.level - 1 >= len(parts):
        return None
    base = ".".join(parts[: len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def insert(text: str, statements: Sequence[str], before: int) -> str:
    """``text`` with ``statements`` (each one line) after the last top-level import above line ``before``
    (1-based), or, when there is none, after the module's docstring and ``__future__`` imports."""
    if not statements:
        return text
    module = newer_syntax.parse(text, "<tree>")[0]
    at = 0
    for stmt in module.body:
        if stmt.lineno >= before:
            break
        is_doc = stmt is module.body[0] and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) or is_doc:
            at = stmt.end_lineno or stmt.lineno
    lines = text.splitlines(keepends=True)
    if at and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    lines[at:at] = [f"{s}\n" for s in statements]
    return "".join(lines)

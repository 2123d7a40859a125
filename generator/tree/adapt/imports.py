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

from generator.judge.couplings.upstream import Definition, Resolver, bindings_of


def providers(resolver: Resolver, module: str) -> dict[str, str]:
    """For each name ``module`` binds once at its top level: the import statement that binds it in another file."""
    found = resolver.module(module)
    if found is None:
        return {}
    package = module if found.is_package else module.rpartition(".")[0]
    out: dict[str, str] = {}
    for name, node in _once_at_top(found.tree):
        statement = _statement(node, name, module, package)
        if statement is not None:
            out[name] = statement
    return out


def origins(resolver: Resolver, module: str) -> dict[str, str]:
    """For each name B's ``module`` binds once at its top: the vLLM definition it is (its canonical name), or ""
    when it is not vLLM's (a third-party import)."""
    found = resolver.module(module)
    if found is None:
        return {}
    package = module if found.is_package else module.rpartition(".")[0]
    return {name: _origin(resolver, node, name, module, package) for name, node in _once_at_top(found.tree)}


def tree_origins(resolver: Resolver, tree: ast.Module, module: str) -> dict[str, str]:
    """For each name the tree's file (module ``module``) binds once at its top: the vLLM definition an import of
    vLLM reaches (canonical, as B resolves it), ``tree:<module>.<name>`` for what the tree defines or imports from
    elsewhere (its own modules, a third party), so it compares unequal to any of vLLM's."""
    package = module.rpartition(".")[0]
    out: dict[str, str] = {}
    for name, node in _once_at_top(tree):
        origin = _origin(resolver, node, name, module, package)
        if origin.split(".")[0] == "vllm":
            out[name] = origin
            continue
        statement = _statement(node, name, module, package) or ""
        source, _, rest = statement.removeprefix("from ").partition(" import ")
        out[name] = f"tree:{source}.{rest.split(' as ')[0]}" if rest else f"tree:{module}.{name}"
    return out


def _once_at_top(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """The names a module binds once, by a statement at its top (not under an ``if`` or a ``try``)."""
    top = {id(stmt) for stmt in tree.body}
    return [
        (name, nodes[0]) for name, nodes in bindings_of(tree.body).items() if len(nodes) == 1 and id(nodes[0]) in top
    ]


def _origin(resolver: Resolver, node: ast.AST, name: str, module: str, package: str) -> str:
    statement = _statement(node, name, module, package)
    if statement is None or not statement.startswith("from "):
        return ""
    source, _, rest = statement.removeprefix("from ").partition(" import ")
    dotted = f"{source}.{rest.split(' as ')[0]}"
    if dotted.split(".")[0] != "vllm":
        return ""
    found = resolver.resolve(dotted)
    return found.name if isinstance(found, Definition) else dotted


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
    module = ast.parse(text)
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


def wanted(names: set[str], available: Mapping[str, str]) -> list[str] | None:
    """The statements binding ``names``, in a fixed order; None when one of them has no provider."""
    if any(n not in available for n in names):
        return None
    return sorted({available[n] for n in names})

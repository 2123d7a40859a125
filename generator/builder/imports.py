"""Import lines for the names the generated class uses but does not bind.

Free names come from the stdlib ``symtable`` of the generated class (the compiler's own view of
scopes, so comprehensions, lambdas and annotations are handled as Python handles them). Each is
then resolved against upstream's module: an import statement there is re-emitted in absolute
form; a name upstream defines itself is imported from upstream's module.
"""

from __future__ import annotations

import ast
import builtins
import symtable
import sys
from collections import defaultdict
from dataclasses import dataclass, field

from generator.errors import UpstreamShapeError

UPSTREAM_MODULE = "vllm.v1.core.sched.scheduler"
_WRAP_AT = 88


@dataclass(frozen=True, order=True)
class Binding:
    """How upstream's module binds one name."""

    module: str  # absolute module ("" for a plain ``import a.b``)
    name: str  # the imported thing, or the dotted module for ``import a.b``
    asname: str | None
    type_checking: bool
    local: bool = False  # defined by upstream's module itself (def, class, assignment)

    @property
    def bound_name(self) -> str:
        if self.asname:
            return self.asname
        return self.name.split(".")[0] if not self.module else self.name


@dataclass
class ImportBlock:
    future: list[str] = field(default_factory=list)
    # Groups of lines (stdlib, then third party), rendered with a blank line between groups.
    runtime: list[list[str]] = field(default_factory=list)
    type_checking: list[str] = field(default_factory=list)


def free_names(class_code: str) -> set[str]:
    """Names the class code reads from module or builtin scope."""
    top = symtable.symtable(class_code, "<generated>", "exec")
    names: set[str] = set()
    bound_at_top = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    names |= {s.get_name() for s in top.get_symbols() if s.is_referenced()} - bound_at_top

    def walk(table: symtable.SymbolTable) -> None:
        for sym in table.get_symbols():
            if sym.is_referenced() and sym.is_global() and not sym.is_declared_global():
                names.add(sym.get_name())
            elif sym.is_referenced() and table.get_type() == "class" and not sym.is_assigned():
                # In a class body an unbound name is looked up in the module (annotations, bases).
                names.add(sym.get_name())
        for child in table.get_children():
            walk(child)

    for child in top.get_children():
        walk(child)
    return names


def module_bindings(tree: ast.Module, module_name: str = UPSTREAM_MODULE) -> dict[str, list[Binding]]:
    """Every name upstream's module binds at top level, including under TYPE_CHECKING and try."""
    package = module_name.rsplit(".", 1)[0]
    bindings: dict[str, list[Binding]] = defaultdict(list)

    def add(binding: Binding) -> None:
        bindings[binding.bound_name].append(binding)

    def visit(stmts: list[ast.stmt], type_checking: bool) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    add(Binding("", alias.name, alias.asname, type_checking))
            elif isinstance(stmt, ast.ImportFrom):
                absolute = _absolute(stmt, package)
                for alias in stmt.names:
                    if alias.name == "*":
                        raise UpstreamShapeError(
                            f"upstream {module_name} uses `from {absolute} import *`: free names cannot be resolved"
                        )
                    add(Binding(absolute, alias.name, alias.asname, type_checking))
            elif isinstance(stmt, ast.If):
                visit(stmt.body, type_checking or _is_type_checking(stmt.test))
                visit(stmt.orelse, type_checking)
            elif isinstance(stmt, ast.Try):
                for block in (stmt.body, stmt.orelse, stmt.finalbody, *(h.body for h in stmt.handlers)):
                    visit(block, type_checking)
            else:
                for name in _defined_names(stmt):
                    add(Binding(module_name, name, None, type_checking, local=True))

    visit(tree.body, False)
    return dict(bindings)


def resolve(
    names: set[str], bindings: dict[str, list[Binding]], *, tag: str, module_name: str = UPSTREAM_MODULE
) -> ImportBlock:
    runtime: list[Binding] = []
    checking: list[Binding] = []
    for name in sorted(names):
        found = bindings.get(name)
        if not found:
            if hasattr(builtins, name):
                continue
            raise UpstreamShapeError(
                f"schedule() at {tag} uses {name!r}, which upstream's module neither imports nor "
                "defines: teach generator/builder/imports.py where it comes from"
            )
        if len(found) == 1 and not found[0].local:
            (runtime, checking)[found[0].type_checking].append(found[0])
        elif any(not b.type_checking for b in found):
            # Several bindings (e.g. try/except imports) or a local definition: the module's
            # final value is what upstream's schedule() sees, so take it from the module.
            runtime.append(Binding(module_name, name, None, False, local=True))
        else:
            checking.append(Binding(module_name, name, None, True, local=True))
    stdlib = [b for b in runtime if _top(b) in sys.stdlib_module_names]
    third_party = [b for b in runtime if _top(b) not in sys.stdlib_module_names]
    groups = [g for g in (_lines(stdlib), _lines(third_party)) if g]
    return ImportBlock(runtime=groups, type_checking=_lines(checking))


def _top(binding: Binding) -> str:
    return (binding.module or binding.name).split(".")[0]


def future_imports(tree: ast.Module) -> list[str]:
    names = sorted(
        {a.name for s in tree.body if isinstance(s, ast.ImportFrom) and s.module == "__future__" for a in s.names}
    )
    return [f"from __future__ import {', '.join(names)}"] if names else []


def _lines(bindings: list[Binding]) -> list[str]:
    plain = sorted({_alias(b.name, b.asname) for b in bindings if not b.module})
    grouped: dict[str, set[str]] = defaultdict(set)
    for b in bindings:
        if b.module:
            grouped[b.module].add(_alias(b.name, b.asname))
    lines = [f"import {p}" for p in plain]
    for module in sorted(grouped):
        members = sorted(grouped[module])
        line = f"from {module} import {', '.join(members)}"
        if len(line) > _WRAP_AT:
            line = f"from {module} import (\n" + "".join(f"    {n},\n" for n in members) + ")"
        lines.append(line)
    return lines


def _alias(name: str, asname: str | None) -> str:
    return f"{name} as {asname}" if asname else name


def _absolute(stmt: ast.ImportFrom, package: str) -> str:
    if not stmt.level:
        return stmt.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (stmt.level - 1)]
    return ".".join([*base, stmt.module] if stmt.module else base)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _defined_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]

"""What a name in a tree's file stands for: imports and aliases, scope by scope, as dotted paths.

A *reference* is a dotted path and the attributes read from it: ``import vllm.v1.engine.core as m``
makes ``m.DPEngineCoreProc`` the reference ``vllm.v1.engine.core.DPEngineCoreProc``. Names bound by
``import``, ``from ... import`` (relative ones too), ``importlib.import_module("...")``,
``sys.modules["..."]``, ``getattr(x, "...")`` and plain aliases (``cls = mod.Cls``) are followed;
anything else a scope binds (a parameter, a loop variable, a call's result) shadows the name and
stands for nothing. Scopes are Python's: a function sees its own names, then its enclosing
functions', then the module's, never a class body's. Within a scope the reading is flow-insensitive:
every binding of a name counts.

A reference into another module of the same tree (``from vllm_ascend.utils import X``) is followed
once every file is read, through what that module binds at its top level (``Exports``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

_IMPORT_MODULE = frozenset({"importlib.import_module"})
_SYS_MODULES = "sys.modules"


@dataclass(frozen=True)
class Ref:
    """A dotted path (``vllm.config.ModelConfig``) reached through the file's own names."""

    path: str

    def child(self, name: str) -> Ref:
        return Ref(f"{self.path}.{name}")

    @property
    def in_vllm(self) -> bool:
        return self.path == "vllm" or self.path.startswith("vllm.")


def module_name(rel: str) -> str:
    """``pkg/sub/mod.py`` -> ``pkg.sub.mod`` (``__init__.py``: the package)."""
    parts = rel.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    """``from .x import y`` in ``module``: the module ``.x`` names."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


@dataclass
class Scope:
    """The names one module, class body or function binds (what each may stand for)."""

    parent: Scope | None
    kind: str  # module | class | function
    names: dict[str, list[Ref | None]] = field(default_factory=dict)
    # Aliases (``x = <expr>``) are resolved when first looked up, once the whole scope is known.
    pending: dict[str, list[ast.expr]] = field(default_factory=dict)

    def bind(self, name: str, ref: Ref | None) -> None:
        self.names.setdefault(name, []).append(ref)

    def lookup(self, name: str, _seen: frozenset[tuple[int, str]] = frozenset()) -> list[Ref]:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names or name in scope.pending:
                return scope._resolved(name, _seen)
            scope = scope.parent
            while scope is not None and scope.kind == "class":  # methods do not see the class body
                scope = scope.parent
        return []

    def _resolved(self, name: str, seen: frozenset[tuple[int, str]]) -> list[Ref]:
        key = (id(self), name)
        if name in self.pending and key not in seen:  # ``x = x.y`` refers to itself: seen once
            exprs = self.pending.pop(name)
            for expr in exprs:
                found: list[Ref | None] = list(refs(expr, self, seen | {key}))
                for ref in found or [None]:
                    self.bind(name, ref)
        return list(dict.fromkeys(r for r in self.names.get(name, []) if r is not None))  # `import vllm` twice: once


def refs(expr: ast.AST, scope: Scope, seen: frozenset[tuple[int, str]] = frozenset()) -> list[Ref]:
    """What ``expr`` may stand for, as dotted paths ([] when it is no path the file's names reach)."""
    if isinstance(expr, ast.Name):
        return scope.lookup(expr.id, seen)
    if isinstance(expr, ast.Attribute):
        return [r.child(expr.attr) for r in refs(expr.value, scope, seen)]
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, str):
        if any(r.path == _SYS_MODULES for r in refs(expr.value, scope, seen)):
            return [Ref(expr.slice.value)]
        return []
    if isinstance(expr, ast.Call) and expr.args:
        first = expr.args[0]
        module = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
        if module is not None and {r.path for r in refs(expr.func, scope, seen)} & _IMPORT_MODULE:
            return [Ref(module)]
        if _is_builtin(expr.func, "getattr", scope) and len(expr.args) >= 2:
            name = expr.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                return [r.child(name.value) for r in refs(first, scope, seen)]
    return []


def _is_builtin(func: ast.AST, name: str, scope: Scope) -> bool:
    """``func`` is the builtin ``name`` (not shadowed by a binding the file makes)."""
    return isinstance(func, ast.Name) and func.id == name and not scope.lookup(name)


def _targets(target: ast.AST) -> Iterator[ast.Name]:
    if isinstance(target, ast.Name):
        yield target
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from _targets(elt)
    elif isinstance(target, ast.Starred):
        yield from _targets(target.value)


def bind_statement(node: ast.AST, scope: Scope, module: str, is_package: bool) -> None:
    """Record what ``node`` binds in ``scope`` (imports, aliases; other bindings shadow)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                scope.bind(alias.asname, Ref(alias.name))
            else:
                top = alias.name.split(".")[0]
                scope.bind(top, Ref(top))
    elif isinstance(node, ast.ImportFrom):
        base = absolute(module, is_package, node.level, node.module) if node.level else (node.module or "")
        for alias in node.names:
            if alias.name != "*":
                scope.bind(alias.asname or alias.name, Ref(f"{base}.{alias.name}"))
    elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        for target in targets:
            for name in _targets(target):
                if value is not None and isinstance(target, ast.Name) and not isinstance(node, ast.AugAssign):
                    scope.pending.setdefault(name.id, []).append(value)
                else:
                    scope.bind(name.id, None)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        scope.bind(node.name, None)
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        for name in _targets(node.target):
            scope.bind(name.id, None)
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        for item in node.items:
            if item.optional_vars is not None:
                for name in _targets(item.optional_vars):
                    scope.bind(name.id, None)
    elif isinstance(node, ast.ExceptHandler) and node.name:
        scope.bind(node.name, None)


def bind_arguments(args: ast.arguments, scope: Scope) -> None:
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            scope.bind(arg.arg, None)


# A name of the tree's own modules and what it binds at the top level, for references across files.
Exports = dict[str, dict[str, list[Ref]]]


def follow(ref: Ref, exports: Exports, tree_modules: frozenset[str], depth: int = 0) -> list[Ref]:
    """``ref`` with a prefix that is one of the tree's modules replaced by what that module binds there."""
    if ref.in_vllm or depth > 10:
        return [ref]
    parts = ref.path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:i])
        if module in tree_modules:
            if ".".join(parts[: i + 1]) in tree_modules:
                return [ref]  # a submodule of the tree: the tree's own
            bound = exports.get(module, {}).get(parts[i], [])
            rest = parts[i + 1 :]
            return [r for b in bound for r in follow(Ref(".".join([b.path, *rest])), exports, tree_modules, depth + 1)]
    return [ref]

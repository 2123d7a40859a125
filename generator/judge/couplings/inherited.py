"""What a vLLM class hands a subclass without the subclass naming it, read along its vLLM bases.

A subclass of the tree meets its base's abstract methods (Python refuses to instantiate it while one is
left), its read-only properties (``self.x = ...`` in the subclass raises), the ``__init__`` a dataclass
or a NamedTuple generates from its fields, and the base's ``__init_subclass__`` (run when the subclass is
defined). None of these is a call or an override the tree writes, so they are read here, per release,
from the class's own body and its vLLM bases in method resolution order (bases outside vLLM are not read:
``ABC``, ``nn.Module`` and the like do not change with vLLM).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from generator.judge.couplings.upstream import Definition, Resolver

_DEPTH = 24  # bases followed before giving up (as the resolver does)
_NAMED_TUPLE = ("NamedTuple", "typing.NamedTuple")


def lineage(resolver: Resolver, definition: Definition) -> list[Definition]:
    """The class and its vLLM bases, nearest first, each once (a diamond's shared base after both sides)."""
    order: list[Definition] = []

    def visit(cls: Definition, depth: int) -> None:
        if depth > _DEPTH:
            return
        order.append(cls)
        for base in resolver.bases(cls):
            visit(base, depth + 1)

    visit(definition, 0)
    seen: dict[str, Definition] = {}
    for cls in reversed(order):  # the last occurrence wins: a shared base after every class deriving from it
        seen.setdefault(cls.name, cls)
    return list(reversed(list(seen.values())))


def _decorator_names(node: ast.AST) -> list[str]:
    out = []
    for decorator in getattr(node, "decorator_list", []):
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name):
            out.append(target.id)
        elif isinstance(target, ast.Attribute):
            out.append(target.attr)
    return out


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A class body's statements, those under ``if``/``try`` too (a version guard's members are members)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try)):
            for block in (stmt.body, stmt.orelse, getattr(stmt, "finalbody", [])):
                yield from _statements(block)


def _bound(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def _first_bindings(resolver: Resolver, definition: Definition) -> dict[str, tuple[ast.stmt, ast.ClassDef]]:
    """Each member name -> the statement binding it in the first class of the lineage that binds it."""
    out: dict[str, tuple[ast.stmt, ast.ClassDef]] = {}
    for cls in lineage(resolver, definition):
        node = cls.node
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in _statements(node.body):
            for name in _bound(stmt):
                out.setdefault(name, (stmt, node))
    return out


def abstract_methods(resolver: Resolver, definition: Definition) -> frozenset[str]:
    """The methods a subclass must define before Python lets it be instantiated."""
    return frozenset(
        name
        for name, (stmt, _) in _first_bindings(resolver, definition).items()
        if "abstractmethod" in _decorator_names(stmt)
    )


def read_only_properties(resolver: Resolver, definition: Definition) -> frozenset[str]:
    """Properties with no setter: ``self.<name> = ...`` in a subclass raises AttributeError."""
    out = set()
    for name, (stmt, owner) in _first_bindings(resolver, definition).items():
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) or "property" not in _decorator_names(stmt):
            continue
        setter = any(
            isinstance(d, ast.Attribute) and d.attr == "setter" and isinstance(d.value, ast.Name) and d.value.id == name
            for other in _statements(owner.body)
            for d in getattr(other, "decorator_list", [])
        )
        if not setter:
            out.add(name)
    return frozenset(out)


def fields(resolver: Resolver, definition: Definition) -> tuple[str, ...] | None:
    """The fields a dataclass's or a NamedTuple's generated ``__init__`` takes, in order (``name=`` when it
    has a default); None when no class of the lineage generates one."""
    classes = [c.node for c in lineage(resolver, definition) if isinstance(c.node, ast.ClassDef)]
    generated = [c for c in classes if _generates_init(c)]
    if not generated:
        return None
    out: dict[str, str] = {}
    for cls in reversed(generated):  # a dataclass takes its bases' fields first; a redefinition keeps the place
        for stmt in _statements(cls.body):
            if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
                continue
            if "ClassVar" in ast.unparse(stmt.annotation):  # not a field
                continue
            name = stmt.target.id
            out[name] = f"{name}=" if stmt.value is not None else name
    return tuple(out.values())


def _generates_init(cls: ast.ClassDef) -> bool:
    return "dataclass" in _decorator_names(cls) or any(ast.unparse(b) in _NAMED_TUPLE for b in cls.bases)

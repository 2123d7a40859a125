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

from generator.judge.couplings.classbody import (
    bound_names,
    class_statements,
    decorator_names,
    generates_init,
    merge_fields,
    own_fields,
    self_assigned,
)
from generator.judge.couplings.signatures import Param, Signature
from generator.judge.couplings.upstream import Definition, Resolver

_DEPTH = 24  # bases followed before giving up (as the resolver does)


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


def _first_bindings(resolver: Resolver, definition: Definition) -> dict[str, tuple[ast.stmt, ast.ClassDef]]:
    """Each member name -> the statement binding it in the first class of the lineage that binds it."""
    out: dict[str, tuple[ast.stmt, ast.ClassDef]] = {}
    for cls in lineage(resolver, definition):
        node = cls.node
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in class_statements(node.body):
            for name in bound_names(stmt):
                out.setdefault(name, (stmt, node))
    return out


def abstract_methods(resolver: Resolver, definition: Definition) -> frozenset[str]:
    """The methods a subclass must define before Python lets it be instantiated."""
    return frozenset(
        name
        for name, (stmt, _) in _first_bindings(resolver, definition).items()
        if "abstractmethod" in decorator_names(stmt)
    )


def read_only_properties(resolver: Resolver, definition: Definition) -> frozenset[str]:
    """Properties with no setter: ``self.<name> = ...`` in a subclass raises AttributeError."""
    out = set()
    for name, (stmt, owner) in _first_bindings(resolver, definition).items():
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) or "property" not in decorator_names(stmt):
            continue
        setter = any(
            isinstance(d, ast.Attribute) and d.attr == "setter" and isinstance(d.value, ast.Name) and d.value.id == name
            for other in class_statements(owner.body)
            for d in getattr(other, "decorator_list", [])
        )
        if not setter:
            out.add(name)
    return frozenset(out)


def fields(resolver: Resolver, definition: Definition) -> tuple[str, ...] | None:
    """The fields a dataclass's or a NamedTuple's generated ``__init__`` takes, in order (``name=`` when it
    has a default, ``*name`` when keyword-only); None when no class of the lineage generates one."""
    found = init_fields(resolver, definition)
    if found is None:
        return None
    return tuple(("*" if kw else "") + name + ("=" if default else "") for name, default, kw in found)


def init_signature(resolver: Resolver, definition: Definition) -> Signature | None:
    """What calling the class binds to when its ``__init__`` is generated (a dataclass's, a NamedTuple's
    ``__new__``) and no class nearer in its lineage writes one; None otherwise."""
    for cls in lineage(resolver, definition):
        node = cls.node
        if not isinstance(node, ast.ClassDef):
            continue
        if any(name in ("__init__", "__new__") for stmt in class_statements(node.body) for name in bound_names(stmt)):
            return None  # written out: the resolver's own reading of it decides
        if generates_init(node):
            break
    found = init_fields(resolver, definition)
    if found is None:
        return None
    positional = tuple(Param(name, default) for name, default, kw in found if not kw)
    keyword_only = tuple(Param(name, default) for name, default, kw in found if kw)
    return Signature(positional, 0, keyword_only, False, False)


def init_fields(resolver: Resolver, definition: Definition) -> list[tuple[str, bool, bool]] | None:
    """(name, has a default, keyword-only) for each field the generated ``__init__`` takes, in order."""
    classes = [c.node for c in lineage(resolver, definition) if isinstance(c.node, ast.ClassDef)]
    layers = [found for c in reversed(classes) if (found := own_fields(c)) is not None]  # bases' fields first
    return merge_fields(layers) if layers else None


def provides(resolver: Resolver, definition: Definition) -> tuple[frozenset[str], frozenset[str]]:
    """What a vLLM class gives its instances: the names its lineage binds at class level (methods,
    properties, class attributes), and the attributes its lineage's ``__init__`` methods assign on ``self``."""
    members: set[str] = set()
    assigned: set[str] = set()
    for cls in lineage(resolver, definition):
        node = cls.node
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in class_statements(node.body):
            members.update(bound_names(stmt))
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                assigned.update(self_assigned(stmt))
    return frozenset(members), frozenset(assigned)


def set_in_methods(resolver: Resolver, definition: Definition) -> dict[str, frozenset[str]]:
    """The attributes a vLLM class's lineage assigns on ``self`` in methods other than ``__init__``, each with
    those methods' names: a value such a method puts there, which the class's other methods then read."""
    out: dict[str, set[str]] = {}
    for cls in lineage(resolver, definition):
        node = cls.node
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in class_statements(node.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name != "__init__":
                for name in self_assigned(stmt):
                    out.setdefault(name, set()).add(stmt.name)
    return {name: frozenset(methods) for name, methods in out.items()}

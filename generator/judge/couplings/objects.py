"""The objects a tree's function builds of a class it names, and what it does to them.

A test often builds the object under test by hand: ``state = AscendModelState.__new__(AscendModelState)``
(no ``__init__`` runs), then sets what the code it calls reads (``state.max_model_len = 32``) and calls a
method (``state.prepare_attn(...)``). What vLLM B does to the class then meets what the test did at A:
a property B made read-only that the test assigns raises ``AttributeError``; an attribute B's method now
reads that the test never set raises too. This reads, per function (or module), each local name bound to
``Cls(...)``, ``Cls.__new__(Cls)`` or ``object.__new__(Cls)``, the attributes assigned on it
(``x.attr = ...``, ``setattr(x, "attr", ...)``) and the methods called on it (``x.m(...)``). The reading is
flow-insensitive, as the rest of ``sites``: every binding of the name counts.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from generator.judge.couplings.bindings import Ref, Scope, refs


@dataclass(frozen=True)
class Built:
    """An object of a class the file names, built in one scope, with what the scope does to it."""

    line: int
    cls: Ref  # the class as the file names it (followed into the tree's own modules later)
    bare: bool  # built without its ``__init__`` (``Cls.__new__(Cls)``, ``object.__new__(Cls)``)
    assigns: tuple[tuple[str, int], ...] = ()  # (attribute, line) set on it
    calls: tuple[tuple[str, int], ...] = ()  # (method, line) called on it


def built_in(body: Sequence[ast.stmt], scope: Scope, own: dict[str, str]) -> list[Built]:
    """The objects ``body`` (a function's, or a module's) builds into a local name, with their uses.

    ``own``: the file's top-level classes, by name, as dotted paths (a name its scope binds to no import).
    """
    made: dict[str, list[tuple[int, Ref, bool]]] = {}
    for node in _own_nodes(body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found = _construction(node.value, scope, own)
            if found is not None:
                made.setdefault(node.targets[0].id, []).append((node.lineno, *found))
    if not made:
        return []
    assigns: dict[str, list[tuple[str, int]]] = {}
    called: dict[str, list[tuple[str, int]]] = {}
    for node in _own_nodes(body):
        for target in _assigned(node):
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id in made:
                assigns.setdefault(target.value.id, []).append((target.attr, target.lineno))
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in made:
                called.setdefault(func.value.id, []).append((func.attr, node.lineno))
            elif (
                isinstance(func, ast.Name)
                and func.id == "setattr"
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id in made
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                assigns.setdefault(node.args[0].id, []).append((node.args[1].value, node.lineno))
    return [
        Built(line, cls, bare, tuple(assigns.get(name, ())), tuple(called.get(name, ())))
        for name, found in sorted(made.items())
        for line, cls, bare in found
    ]


def _construction(value: ast.expr, scope: Scope, own: dict[str, str]) -> tuple[Ref, bool] | None:
    """(the class, built bare) when ``value`` builds an object of a class the file names."""
    if not isinstance(value, ast.Call):
        return None
    func, bare = value.func, False
    if isinstance(func, ast.Attribute) and func.attr == "__new__" and value.args:
        func, bare = value.args[0], True  # ``Cls.__new__(Cls)`` or ``object.__new__(Cls)``: the first argument
    found = refs(func, scope)
    if found:
        return found[0], bare
    if isinstance(func, ast.Name) and func.id in own:
        return Ref(own[func.id]), bare
    return None


def _own_nodes(body: Sequence[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of ``body``, not those of the functions and classes it defines (their own scopes)."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _assigned(node: ast.AST) -> Iterator[ast.expr]:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _flat(target)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        yield node.target


def _flat(target: ast.expr) -> Iterator[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from _flat(elt)
    else:
        yield target

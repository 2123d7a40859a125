"""What a merged method newly reads that another method of B's class sets up: held to the tree's class as this
run leaves it.

B's change often spans two methods: ``__init__`` sets ``self.gate.bias_vl`` up, ``forward`` reads it. The
three-way check sees one function; ``fits`` sees what the tree's file binds and what B's ``__init__`` sets on
``self`` directly. Here every chain the merged function reads through ``self`` (``self.gate.bias_vl``) that the
copy did not, and that B's class sets in a method whose A version did not, must be set by the tree's class
once this run is written: by one of its methods (the re-synced ones as merged), or by B's method itself when
the tree's class derives from B's and leaves that method to B (or calls it through ``super()``). Else the
merge is held: the copy stays as it was, and the report says what it needs and from where.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping

from generator.judge.couplings import inherited
from generator.judge.couplings.classbody import class_statements
from generator.judge.couplings.upstream import Definition, Resolver

Function = ast.FunctionDef | ast.AsyncFunctionDef
# A chain read or set through ``self`` (``gate.bias_vl``) -> B's methods that newly set it.
SetUp = Mapping[str, frozenset[str]]


def chains(func: Function, stores: bool) -> set[str]:
    """The dotted chains under ``self`` the function sets (``stores``) or reads: ``self.gate.bias_vl = x`` sets
    ``gate.bias_vl``; reading ``self.gate.bias_vl`` reads ``gate`` and ``gate.bias_vl``."""
    params = [*func.args.posonlyargs, *func.args.args]
    if not params:
        return set()
    receiver = params[0].arg
    out: set[str] = set()
    for node in ast.walk(func):
        if not isinstance(node, ast.Attribute):
            continue
        chain = _chain(node, receiver)
        if chain is None:
            continue
        if isinstance(node.ctx, (ast.Store, ast.Del) if stores else ast.Load):
            out.add(chain)
    if stores:
        out |= _setattr_chains(func, receiver)
    return out


def _chain(node: ast.Attribute, receiver: str) -> str | None:
    parts = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    if isinstance(value, ast.Name) and value.id == receiver:
        return ".".join(reversed(parts))
    return None


def _setattr_chains(func: Function, receiver: str) -> set[str]:
    """``setattr(self.gate, "bias_vl", x)``: the chain it sets."""
    out = set()
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            target = node.args[0]
            if isinstance(target, ast.Name) and target.id == receiver:
                out.add(node.args[1].value)
            elif isinstance(target, ast.Attribute) and (head := _chain(target, receiver)) is not None:
                out.add(f"{head}.{node.args[1].value}")
    return out


def set_up(a: Resolver, b: Resolver, old: Definition | None, new: Definition | None) -> dict[str, frozenset[str]]:
    """For a copied method: each chain B's class (its lineage) sets in a method whose A version (A's class of
    the method) did not set it, with those methods. {} for a function, or a class not read at either release.
    Read once per class pair: a tree copies many methods of one class."""
    owner_b, owner_a = _owner(b, new), _owner(a, old)
    if owner_b is None or owner_a is None:
        return {}
    key = (id(a), a.label, id(b), b.label, owner_a.name, owner_b.name)
    if key not in _READ:
        _READ[key] = _set_up(a, b, owner_a, owner_b)
    return _READ[key]


_READ: dict[tuple[int, str, int, str, str, str], dict[str, frozenset[str]]] = {}


def _set_up(a: Resolver, b: Resolver, owner_a: Definition, owner_b: Definition) -> dict[str, frozenset[str]]:
    at_a = {name: chains(func, True) for name, func in _methods(a, owner_a)}
    out: dict[str, set[str]] = {}
    for name, func in _methods(b, owner_b):
        for chain in chains(func, True) - at_a.get(name, set()):
            out.setdefault(chain, set()).add(name)
    return {chain: frozenset(methods) for chain, methods in out.items()}


def _owner(resolver: Resolver, method: Definition | None) -> Definition | None:
    if method is None or "." not in method.qualname:
        return None
    found = resolver.resolve(method.name.rpartition(".")[0])
    return found if isinstance(found, Definition) and found.kind == "class" else None


def _methods(resolver: Resolver, cls: Definition) -> Iterator[tuple[str, Function]]:
    seen: set[str] = set()
    for base in inherited.lineage(resolver, cls):
        node = base.node
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in class_statements(node.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name not in seen:
                seen.add(stmt.name)
                yield stmt.name, stmt


def needs(
    ours: Function,
    merged: Function,
    setup: SetUp,
    methods: Mapping[str, Function],
    merged_here: frozenset[str],
    derives: bool,
    runs_base: Mapping[str, bool],
) -> str:
    """Empty when every chain the merged method newly reads and B's class newly sets up is set by the tree's
    class as this run leaves it; else why not.

    ``methods``: the tree's class's methods as this run writes them (a re-synced one as merged), by name;
    ``merged_here``: those re-synced; ``derives``: the tree's class derives from B's; ``runs_base``: for a method
    the tree's class defines, whether it calls B's through ``super()``.
    """
    wanted = sorted(c for c in chains(merged, False) - chains(ours, False) if c in setup)
    if not wanted:
        return ""
    stored = set().union(*(chains(f, True) for f in methods.values())) if methods else set()
    for chain in wanted:
        if chain in stored:
            continue
        for method in sorted(setup[chain]):
            own = methods.get(method)
            if own is None and derives:
                continue  # B's method runs for the tree's class
            if own is not None and derives and runs_base.get(method, False):
                continue
            head = f"B's function reads self.{chain}, which B's {method} sets"
            if own is None:
                return f"{head}; the tree's class neither sets it nor derives from B's"
            state = "re-synced without it" if method in merged_here else "left as it was"
            return f"{head} and the tree's {method} does not ({state})"
    return ""

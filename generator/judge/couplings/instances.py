"""What B's class does to the objects the tree builds of its own classes below it.

The tree builds objects of its classes: calls them (their ``__init__``, generated from a vLLM dataclass's
fields when no class on the way writes one), builds them bare in its tests (``Cls.__new__(Cls)``) and sets
by hand what the code under test reads, assigns attributes on them, or writes its own ``__init__`` that
never calls the base's. None of these is a call of a vLLM name the tree writes, so ``call-refused`` and the
subclass rules that read the class statement alone do not see them. Here each is bound to both releases:

- a call of the tree's class that its ``__init__`` at A took and at B refuses (the base's fields changed);
- an attribute assigned on an object of the class that B made a property without a setter;
- an attribute B's methods now read on ``self`` (one A's did not) that the object never gets: a bare object
  only has what the test set; one the tree's own ``__init__`` builds without the base's, what that sets.

Each names the tree's line (the call, the assignment, where the object is built or its ``__init__``) and,
for a read, B's line that reads it.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from generator.judge.couplings import inherited, signatures
from generator.judge.couplings.classbody import Field, class_statements, merge_fields, self_assigned
from generator.judge.couplings.signatures import Call, Param, Signature
from generator.judge.couplings.upstream import Definition, Resolver

_DEPTH = 12  # self calls followed from one method


@dataclass(frozen=True, order=True)
class Family:
    """A class of the tree with what it and the tree's classes between it and vLLM write."""

    qualname: str
    binds: frozenset[str]  # methods and class-level names
    assigns: frozenset[str]  # attributes their methods set on ``self``
    own_init: bool  # one of them writes ``__init__`` or ``__new__``
    calls_base_init: bool  # ... and it calls ``super().__init__``
    layers: tuple[tuple[Field, ...], ...]  # the dataclass fields each adds, the farthest first
    reads: frozenset[str] = frozenset()  # what their methods read on ``self`` (their calls of its methods too)


@dataclass(frozen=True, order=True)
class Use:
    """One thing the tree does with an object of one of its classes."""

    family: Family
    path: str
    line: int
    # call: the class called; assign: an attribute set on an object; bare: an object built without __init__;
    # init: the class's own __init__, which does not call the base's; reads: what the class's methods read on
    # self; calls: the methods the tree calls on an object it built
    what: str
    call: Call | None = None
    attrs: tuple[str, ...] = ()  # assign: the attribute; bare: every attribute set on it
    methods: tuple[str, ...] = ()  # bare: the methods called on it
    lines: tuple[int, ...] = ()  # reads, calls: the first line of each of ``attrs``
    end: int = 0  # init: the ``__init__``'s last line (what runs is its body)


@dataclass(frozen=True)
class Found:
    rule: str  # call-refused | property-assigned | member-gone | attribute-unset
    reason: str
    path: str
    line: int
    end: int = 0  # the rule points at a function's body (an __init__): its last line


def judge(uses: Sequence[Use], old: Definition, new: Definition, a: Resolver, b: Resolver) -> Found | None:
    """The first use of the tree's objects below ``old``/``new`` (a vLLM class at A and B) that B breaks."""
    for use in sorted(uses, key=lambda u: (u.path, u.line, u.what)):
        if use.what == "call" and use.call is not None and not use.family.own_init:
            sig_a, sig_b = _init(use.family, old, a), _init(use.family, new, b)
            if sig_a is not None and sig_b is not None and (why := signatures.newly_refused(use.call, sig_a, sig_b)):
                return Found(
                    "call-refused",
                    f"the call of {use.family.qualname} at {use.path}:{use.line}: its __init__ at {b.label} {why}",
                    use.path,
                    use.line,
                )
    read_only = inherited.read_only_properties(b, new) - inherited.read_only_properties(a, old)
    for use in uses:
        if use.what in ("assign", "bare") and (hit := sorted((set(use.attrs) & read_only) - use.family.binds)):
            return Found(
                "property-assigned",
                f"{new.name}.{hit[0]} is a property without a setter at {b.label}: {use.path}:{use.line} sets it "
                f"on a {use.family.qualname}",
                use.path,
                use.line,
            )
    if (found := _member_gone(uses, old, new, a, b)) is not None:
        return found
    for use in uses:
        if (found := _unset(use, old, new, a, b)) is not None:
            return found
    return None


def _member_gone(uses: Sequence[Use], old: Definition, new: Definition, a: Resolver, b: Resolver) -> Found | None:
    """What the tree reads or calls on an object of the class (its own class's methods on ``self``, an object
    it built) that A's class had (a member, an attribute its methods set) and B's has not."""
    wanted = [u for u in uses if u.what in ("reads", "calls") and u.attrs]
    if not wanted:
        return None
    at_a, at_b = _provided(a, old), _provided(b, new)
    for use in sorted(wanted, key=lambda u: (u.path, u.line, u.what)):
        gone = sorted((set(use.attrs) & (at_a - at_b)) - use.family.binds - use.family.assigns)
        if gone:
            how = "reads on self" if use.what == "reads" else "calls on the object built"
            line = use.lines[use.attrs.index(gone[0])] if use.lines else use.line
            return Found(
                "member-gone",
                f"{use.family.qualname} {how} {gone[0]}, which {old.name} had at {a.label} and {new.name} has not at "
                f"{b.label} ({use.path}:{line})",
                use.path,
                line,
            )
    return None


def _provided(resolver: Resolver, cls: Definition) -> set[str]:
    members, assigned = inherited.provides(resolver, cls)
    return set(members) | set(assigned) | set(inherited.set_in_methods(resolver, cls))


def _init(family: Family, cls: Definition, resolver: Resolver) -> Signature | None:
    """What calling the tree's class binds to at ``resolver``'s release: the ``__init__`` its dataclasses
    generate from the vLLM base's fields and theirs, else the base's own."""
    if not family.layers:
        return _callee(resolver, cls)
    base: list[Field] = list(inherited.init_fields(resolver, cls) or [])
    found = merge_fields([base, *family.layers])
    positional = tuple(Param(name, default) for name, default, kw in found if not kw)
    keyword_only = tuple(Param(name, default) for name, default, kw in found if kw)
    return Signature(positional, 0, keyword_only, False, False)


def _callee(resolver: Resolver, cls: Definition) -> Signature | None:
    if (generated := inherited.init_signature(resolver, cls)) is not None:
        return generated
    init = resolver.defines(cls.name, "__init__")
    node = init.node if init is not None else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return signatures.of(node.args).bound()


def _unset(use: Use, old: Definition, new: Definition, a: Resolver, b: Resolver) -> Found | None:
    """An attribute B's inherited methods newly read on an object that never gets it."""
    family = use.family
    if use.what == "bare":
        given = set(use.attrs) | family.binds
        methods = [m for m in use.methods if m not in family.binds]
        where = f"the object built bare at {use.path}:{use.line}"
    elif use.what == "init" and family.own_init and not family.calls_base_init:
        given = set(family.assigns) | family.binds
        # only what B's own __init__ now sets: the tree's __init__, written for A, sets what A's did
        new_sets = _init_assigns(b, new) - _init_assigns(a, old)
        methods = _entries(b, new, family.binds, family.reads)
        where = f"{family.qualname}.__init__ ({use.path}:{use.line}), which does not call the base's,"
    else:
        return None
    members_b = inherited.provides(b, new)[0]
    for method in methods:
        at_b = _reads(b, new, method)
        at_a = _reads(a, old, method)
        for attr, (path, line, owner) in sorted(at_b.items()):
            if attr in at_a or attr in given or attr in members_b:
                continue
            if use.what == "init" and attr not in new_sets:
                continue
            return Found(
                "attribute-unset",
                f"{b.label}'s {owner}.{method} reads self.{attr} ({path}:{line}); {where} never gets it",
                use.path,
                use.line,
                use.end,
            )
    return None


_Def = ast.FunctionDef | ast.AsyncFunctionDef


def _bindings(resolver: Resolver, cls: Definition) -> dict[str, tuple[_Def, str, str]]:
    """Each method of the class's lineage, the first that defines it: (its def, its file, its class's name)."""
    out: dict[str, tuple[_Def, str, str]] = {}
    for base in inherited.lineage(resolver, cls):
        node = base.node
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in class_statements(node.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(stmt.name, (stmt, base.path, node.name))
    return out


def _entries(
    resolver: Resolver, cls: Definition, replaced: frozenset[str], called: frozenset[str] = frozenset()
) -> list[str]:
    """The methods of B's class an object whose ``__init__`` is the tree's own (without B's) is entered through:
    its public ones the tree does not replace, and those the tree's own methods call on ``self`` (``called``).
    What these call on ``self`` is followed by ``_reads``, with what they set first; a private helper only
    B's ``__init__`` calls is never entered."""
    methods = _bindings(resolver, cls)
    return sorted(
        n for n in methods if n not in replaced and not n.startswith("__") and (not n.startswith("_") or n in called)
    )


def _init_assigns(resolver: Resolver, cls: Definition) -> set[str]:
    """What the ``__init__`` methods of the class's lineage set on ``self`` (a subclass's runs its base's)."""
    out: set[str] = set()
    for base in inherited.lineage(resolver, cls):
        node = base.node
        if isinstance(node, ast.ClassDef):
            for stmt in class_statements(node.body):
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "__init__":
                    out |= self_assigned(stmt)
    return out


def _reads(resolver: Resolver, cls: Definition, method: str) -> dict[str, tuple[str, int, str]]:
    """What ``method`` of the class reads on ``self`` (attribute -> B's file, line and the class defining the
    method that reads it), following its calls of the class's own methods; what they set is not read."""
    methods = _bindings(resolver, cls)
    reads: dict[str, tuple[str, int, str]] = {}
    sets: set[str] = set()
    seen: set[str] = set()
    todo = [(method, 0)]
    while todo:
        name, depth = todo.pop()
        if name in seen or name not in methods or depth > _DEPTH:
            continue
        seen.add(name)
        stmt, path, owner = methods[name]
        params = [*stmt.args.posonlyargs, *stmt.args.args]
        if not params:
            continue
        sets |= self_assigned(stmt)
        receiver = params[0].arg
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load)
                and isinstance(node.value, ast.Name)
                and node.value.id == receiver
            ):
                reads.setdefault(node.attr, (path, node.lineno, owner))
                if node.attr in methods:
                    todo.append((node.attr, depth + 1))
    return {attr: where for attr, where in reads.items() if attr not in sets and attr not in methods}

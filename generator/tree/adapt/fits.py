"""Whether a merged copy fits where it is written: what B's changes make it read must exist in the tree.

The three-way check (``judge.resync.check``) sees three function texts, not where the copy lives. B's
function reads names B's module binds (``PreTrainedConfig`` in an annotation) and attributes B's class
sets (``self.drop_eagle_group_ids`` in B's ``__init__``); in the tree's file and class they may not exist,
and the merged copy would raise NameError or AttributeError where the copy never did. So every name the
merged copy reads unbound and the copy did not must be bound at the top of the tree's file (or be a
builtin), and every ``self.<attribute>`` it reads and the copy did not, and that B's ``__init__`` sets, must
be set by the tree's class (its body, what its methods assign, the same for its bases in the file), unless
the tree's class derives from B's and runs B's ``__init__`` (defines none, or calls ``super().__init__``);
a class of the tree that copies B's class rather than deriving from it (no base it names, nor a vLLM base
whose lineage at B holds B's class) gets nothing of B's class but what its own vLLM bases give, so any other
attribute or method B's class gives must be its own. Else the copy is a conflict, with which name and why.
"""

from __future__ import annotations

import ast
import builtins
import copy
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass

from generator.judge.couplings import signatures
from generator.judge.couplings.classbody import self_assigned
from generator.judge.couplings.sites import super_calls
from generator.judge.resync.check import function_of, unbound
from generator.judge.resync.merge import header
from generator.tree.adapt.imports import VllmClass

_MODULE_NAMES = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__", "__spec__", "__package__", "__path__"}
Function = ast.FunctionDef | ast.AsyncFunctionDef


def problem(
    module: ast.Module,
    copy_node: Function,
    ours: str,
    merged: str,
    b_members: frozenset[str] | None,
    b_assigned: frozenset[str],
    b_class: str = "",
    importable: Collection[str] = (),
    differ: Callable[[str], tuple[str, str] | None] | None = None,
    set_in: Mapping[str, frozenset[str]] | None = None,
    at_b: VllmClasses | None = None,
) -> str:
    """Empty when the merged copy reads nothing new that the tree lacks; else the one-line reason.

    ``importable``: the names an import added to the tree's file will bind (``imports``), counted as bound.
    ``differ``: for a name, what B's module and the tree's file bind it to when the two differ
    (``imports.Bindings``). ``set_in``: the attributes B's class assigns in methods other than ``__init__``,
    with those methods (``inherited.set_in_methods``). ``at_b``: B's class of the copied method by its
    canonical name, and the vLLM classes the tree's file binds (``imports.Bindings.vllm_class``).
    """
    mine, result = function_of(ours), function_of(merged)
    if mine is None or result is None:
        return ""
    if differ is not None and (why := rebound(module, mine, result, differ)):
        return why
    new_names = new_globals(module, mine, result)
    if new_names is None:
        names = ", ".join(sorted(unbound(result) - unbound(mine)))
        return f"B's function reads {names}; the tree's file has a star import, which hides what it binds"
    missing = sorted(new_names - set(importable))
    if missing:
        return (
            f"B's function reads {', '.join(missing)}, which the tree's file does not bind "
            "(and B's module does not bind once, at its top, for an import to bring in)"
        )
    owner = owner_of(module, copy_node)
    new_attributes = _self_reads(result) - _self_reads(mine)
    if owner is None or b_members is None or not new_attributes:
        return ""
    classes = list(family(module, owner))
    provided = {n for c in classes for n in _bound_in(c.body)} | {n for c in classes for n in _assigned(c)}
    # Only what B's class is known to give is looked for: an attribute nothing in B's class sets is
    # upstream's own contract with its callers, as much the copy's as B's.
    set_in = set_in or {}
    # deriving: B's class-level names are inherited; its __init__ runs if not replaced
    if derives(module, classes, b_class, at_b):
        if why := _set_by_replaced_method(classes, new_attributes - provided, set_in):
            return why
        if _runs_base_init(classes):
            return ""
        wanted, how = b_assigned, "B's __init__ sets it and the tree's class does not run B's"
    else:  # a class of the tree that copies B's: nothing of B's class reaches it, only its own vLLM bases' gifts
        wanted = b_assigned | b_members | set(set_in)
        provided |= _given(module, classes, at_b)
        how = f"B's class sets it and {owner.name} does not derive from B's"
    missing = sorted((new_attributes & wanted) - provided)
    if missing:
        return f"B's function reads self.{missing[0]}, which the tree's class {owner.name} does not set ({how})"
    return ""


def _set_by_replaced_method(
    classes: list[ast.ClassDef], attributes: set[str], set_in: Mapping[str, frozenset[str]]
) -> str:
    """Empty unless an attribute the merged copy newly reads is one B's class puts there in another method,
    which the tree's class replaces with its own that neither sets it nor runs B's (``super().<method>``):
    B's ``__init__`` may set it to a placeholder (``None``), and B's function expects the method's value."""
    own = {
        s.name: s for c in reversed(classes) for s in c.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    for name in sorted(attributes & set(set_in)):
        for method in sorted(set_in[name]):
            replaced = own.get(method)
            if replaced is not None and name not in self_assigned(replaced) and not super_calls(replaced):
                return (
                    f"B's function reads self.{name}, which B's {method} sets and the tree's class replaces "
                    f"{method} without setting it or calling B's"
                )
    return ""


def rebound(
    module: ast.Module, mine: Function, result: Function, differ: Callable[[str], tuple[str, str] | None]
) -> str:
    """Empty unless a statement taken from B uses a global that B's module binds to one vLLM definition and the
    tree's file to another object (the tree's own copy of it, say) in a way that object may not take: B's
    statement was written for B's. Passing the object on (``isinstance(x, N)``, an argument) is taken as it is;
    a call must bind to the signature of the tree's definition, read in the same file; anything else (an
    attribute of it, a call of what the file imports) cannot be judged here and is refused."""
    new = _new_statements(mine, result)
    free = unbound(result)
    defined = {n.name: n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for head in new:
        calls = {id(n.func): n for n in ast.walk(head) if isinstance(n, ast.Call)}
        attributes = {id(n.value) for n in ast.walk(head) if isinstance(n, ast.Attribute)}
        for node in ast.walk(head):
            if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in free):
                continue
            if (id(node) not in calls and id(node) not in attributes) or (pair := differ(node.id)) is None:
                continue
            where = f"{node.id}, which B's module binds to {pair[0]} and the tree's file to {pair[1]}"
            if id(node) in attributes:
                return f"B's statements use an attribute of {where}"
            sig = _signature(defined.get(node.id))
            if sig is None:
                return f"B's statements call {where}, whose signature is not read here"
            if (reason := signatures.refuses(signatures.call_of(calls[id(node)]), sig)) is not None:
                return f"B's statements call {where}, which {reason}"
    return ""


def _signature(node: ast.AST | None) -> signatures.Signature | None:
    """What a call of the tree's function or class takes (a class: its own ``__init__``; None when unread)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return signatures.of(node.args)
    if isinstance(node, ast.ClassDef):
        init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        return signatures.of(init.args).bound() if init is not None else None
    return None


def _new_statements(mine: Function, result: Function) -> list[ast.AST]:
    """The result's statements the copy does not have, each by its header (a compound statement's own
    expressions, not its blocks')."""
    kept = Counter(ast.dump(header(s)) for s in _statements(mine))
    out: list[ast.AST] = []
    for stmt in _statements(result):
        head = header(stmt)
        key = ast.dump(head)
        if kept[key]:
            kept[key] -= 1
        else:
            out.append(head)
    return out


def _statements(func: Function) -> Iterator[ast.stmt]:
    for node in ast.walk(func):
        if isinstance(node, ast.stmt) and node is not func:
            yield node


def new_globals(module: ast.Module, mine: Function, result: Function) -> set[str] | None:
    """The global names the merged function reads that the copy did not and the tree's file does not bind
    (builtins aside); None when the file has a star import (what it binds is not written) and there are any."""
    lazy = any(
        isinstance(s, ast.ImportFrom) and s.module == "__future__" and any(a.name == "annotations" for a in s.names)
        for s in module.body
    )
    new_names = unbound(_reads(result, lazy)) - unbound(_reads(mine, lazy))
    bound = _top_level(module)
    if bound is None:
        return None if new_names else set()
    return new_names - bound - _MODULE_NAMES


@dataclass(frozen=True)
class VllmClasses:
    """B's class of a copied method, by its canonical name, and what the tree's file binds a name to at B."""

    owner: str
    of: Callable[[str], VllmClass | None]


def derives(module: ast.Module, classes: list[ast.ClassDef], name: str, at_b: VllmClasses | None = None) -> bool:
    """One of the classes may derive from B's class ``name``: it names it among its bases, or a base the file
    imports from vLLM whose lineage at B holds B's class (or one whose lineage is not read: taken to)."""
    from_vllm = _vllm_names(module)
    for cls in classes:
        for base in cls.bases:
            target = base.value if isinstance(base, ast.Subscript) else base
            last = (
                target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""
            )
            root = target
            while isinstance(root, ast.Attribute):
                root = root.value
            if name and last == name:
                return True
            if isinstance(root, ast.Name) and root.id in from_vllm:
                found = at_b.of(target.id) if at_b is not None and isinstance(target, ast.Name) else None
                if found is None or at_b is None or at_b.owner in found.lineage:
                    return True
    return False


def _given(module: ast.Module, classes: list[ast.ClassDef], at_b: VllmClasses | None) -> set[str]:
    """What the vLLM bases the classes name give their instances at B (a tree's class copying B's may still
    derive from B's base of it: ``class Info(BaseInfo)`` gets what ``BaseInfo`` has)."""
    if at_b is None:
        return set()
    from_vllm = _vllm_names(module)
    out: set[str] = set()
    for cls in classes:
        for base in cls.bases:
            target = base.value if isinstance(base, ast.Subscript) else base
            if isinstance(target, ast.Name) and target.id in from_vllm and (found := at_b.of(target.id)) is not None:
                out |= found.gives
    return out


def _vllm_names(module: ast.Module) -> set[str]:
    """The names the file binds to vLLM's modules and members (``from vllm.x import Y``, ``import vllm``)."""
    out: set[str] = set()
    for stmt in _flat(module.body):
        if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").split(".")[0] == "vllm" and not stmt.level:
            out.update(a.asname or a.name for a in stmt.names)
        elif isinstance(stmt, ast.Import):
            out.update((a.asname or a.name).split(".")[0] for a in stmt.names if a.name.split(".")[0] == "vllm")
    return out


def _reads(func: Function, lazy: bool) -> Function:
    """The function as its reads are judged: without annotations when the file does not evaluate them."""
    if not lazy:
        return func
    stripped = copy.deepcopy(func)
    for node in ast.walk(stripped):
        if isinstance(node, ast.arg):
            node.annotation = None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
        elif isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant(None)
    return stripped


def _top_level(module: ast.Module) -> set[str] | None:
    """The names the module binds at its top (under ``if``/``try`` too); None when a star import hides some."""
    if any(isinstance(s, ast.ImportFrom) and any(a.name == "*" for a in s.names) for s in _flat(module.body)):
        return None
    return _bound_in(module.body)


def _bound_in(body: list[ast.stmt]) -> set[str]:
    """What a module's or a class's statements bind (imports, defs, assignments, loop and ``with`` targets)."""
    out: set[str] = set()
    for stmt in _flat(body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(stmt.name)
        else:
            for target in _targets(stmt):
                out.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return out


def _flat(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _flat(stmt.body + stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _flat(stmt.body + stmt.orelse + stmt.finalbody + [s for h in stmt.handlers for s in h.body])
        elif isinstance(stmt, (ast.With, ast.For)):
            yield from _flat(stmt.body)


def _targets(stmt: ast.stmt) -> list[ast.expr]:
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign, ast.For)):
        return [stmt.target]
    if isinstance(stmt, ast.With):
        return [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    return []


def owner_of(module: ast.Module, func: Function) -> ast.ClassDef | None:
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef) and any(s is func for s in node.body):
            return node
    return None


def family(module: ast.Module, cls: ast.ClassDef, depth: int = 0) -> Iterator[ast.ClassDef]:
    """The class and the classes of the same file it derives from."""
    yield cls
    if depth > 20:
        return
    local = {n.name: n for n in module.body if isinstance(n, ast.ClassDef)}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in local and local[base.id] is not cls:
            yield from family(module, local[base.id], depth + 1)


def _assigned(cls: ast.ClassDef) -> set[str]:
    return {n for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in self_assigned(s)}


def _self_reads(func: Function) -> set[str]:
    params = [*func.args.posonlyargs, *func.args.args]
    if not params:
        return set()
    receiver = params[0].arg
    return {
        n.attr
        for n in ast.walk(func)
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Load)
        and isinstance(n.value, ast.Name)
        and n.value.id == receiver
    }


def _runs_base_init(classes: list[ast.ClassDef]) -> bool:
    """B's ``__init__`` runs for the tree's class: none of its classes defines one, or the one that does
    calls ``super().__init__``."""
    for cls in classes:
        init = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is not None:
            return bool(super_calls(init))
    return True

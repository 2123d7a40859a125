"""The tree's functions that vLLM's code calls in place of its own, given B's parameters: one file's text.

An override of a vLLM method, the function a patch installs, a subclass ``__init__``: B's code calls each the
way B calls what it replaces. Where B changed that signature (``params.Delta``) the tree's function follows:

- a parameter B added with a default that B's own calls pass: taken at B's place (after the nearest parameter
  before it in B's signature that the tree's has), with B's default, and B's annotation where the file binds
  every name in it; sent on the way the function sends its others to what it wraps (``forwards``). A
  function that sends it nowhere is not written: taking the parameter and dropping it would change what B
  asked for without a word;
- a parameter B renamed: renamed in the signature, where the body reads it, and where it goes to B's
  function by keyword;
- a parameter B removed: no longer passed to B's function (the tree's own signature keeps it);
- a parameter B added with no default: a value is needed; never guessed.

Every edit is libcst's, in place (``cstedits``): each other byte of the file stays. Under ``--span`` the whole
function is written twice behind the tree's gate (A's as it was, the one following B): A's callers and what
A's function wraps keep what they had. Unless what it gets leaves A's calls as they were: parameters B added
that no call of A's code can fill (keyword-only, or after every positional one with no ``*args``), each sent
on only off B's default, which A's callers never pass: then it is written once, as plain ``adapt`` writes it
(a test reading the class's source by its methods' names still finds each ``def`` where it was).
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import libcst as cst

from generator.judge.census import newer_syntax
from generator.tree.adapt import params as signature
from generator.tree.adapt.cstedits import TIGHT, Edits, Writer, inserted, renamed_param
from generator.tree.adapt.forwards import Context, Lookup, Reader, param_names, saved_originals
from generator.tree.adapt.span import Span


@dataclass(frozen=True)
class Target:
    """One function of the tree's file to follow B's signature of what it replaces."""

    qualname: str  # ``Cls.method`` or ``function``, as the file defines it
    occurrence: int  # which of the file's defs of that qualname (0: the first), in the file as read
    site: str
    upstream: str  # B's function it stands in for
    delta: signature.Delta
    b_node: signature.FunctionNode  # B's def: its parameters' places, defaults, annotations
    passed: Mapping[str, bool]  # each added parameter B's own calls pass: by position too (True) or by keyword
    callee: str  # the name B's function goes by (``get_kv_cache_coordinator``, ``__init__``)
    b_name: str  # B's function's canonical name


@dataclass(frozen=True)
class Followed:
    """What was written into one function, each edit in words."""

    site: str
    upstream: str
    edits: tuple[str, ...]


@dataclass(frozen=True)
class NotFollowed:
    site: str
    upstream: str
    why: str
    work: bool  # a person must decide (a value, a place); False: nothing B's calls need is missing


def follow(
    text: str,
    targets: Sequence[Target],
    lookup: Lookup,
    span: Span | None = None,
) -> tuple[str, list[Followed], list[NotFollowed]]:
    """``text`` with each target following B's signature; what was written and what was not, and why.

    ``lookup``: what B and A define for the vLLM names the file imports (``forwards.Lookup``). The file's own
    classes are read here, a base's method followed before its subclasses', so a call of one knows what it
    takes after this run.
    """
    if span is not None and span.helper is None:
        why = "under --span with no version gate helper: the signature is left for a person"
        return text, [], [NotFollowed(t.site, t.upstream, why, True) for t in targets]
    left = [NotFollowed(t.site, t.upstream, _required(t), True) for t in targets if t.delta.required]
    targets = [t for t in targets if not t.delta.required]
    if not targets:
        return text, [], left  # nothing to write: the file is not parsed
    module = cst.parse_module(text)
    tree = newer_syntax.parse(text, "<tree>")[0]
    found = _Defs()
    module.visit(found)
    top = _top_names(tree)
    vllm = _vllm_imports(tree)
    classes = {n.name.value: n for n in module.body if isinstance(n, cst.ClassDef)}
    # A base class's method before its subclasses' (they may send to it), a class's before a module's function
    # (it may construct the class): each is asked what it takes after this run.
    chosen = sorted(((t, found.nth(t.qualname, t.occurrence)) for t in targets), key=lambda x: _order(x[0], classes))
    taken: dict[tuple[str, str], frozenset[str] | None] = {}
    edits, done = Edits(), []
    for target, fn in chosen:
        if fn is None:
            left.append(NotFollowed(target.site, target.upstream, "its function is not found in the file", True))
            continue
        owner, _, method = target.qualname.rpartition(".")
        context = Context(
            target.callee,
            classes.get(owner),
            frozenset(saved_originals(tree, target.callee)),
            vllm,
            classes,
            taken,
            lookup,
            target.b_name,
        )
        reader = Reader(fn, context)
        written, params, refused, a_safe = _one(target, fn, reader, top, edits)
        if owner in classes:
            taken[(owner, method)] = None if reader.any_keyword else frozenset(param_names(params))
        if refused:
            left.append(NotFollowed(target.site, target.upstream, *refused))
        if written:
            if span is not None and not a_safe:
                edits.gated.add(id(fn))
            done.append(Followed(target.site, target.upstream, tuple(written)))
    if not done:
        return text, [], left
    return module.visit(Writer(edits, span)).code, done, left


def _defaulted(name: str, default: cst.BaseExpression) -> tuple[str, str]:
    """The tests true when ``name`` is at B's ``default`` and when it is not: ``is`` for None, True and False
    (``==`` would call a value's own comparison), ``==`` for any other."""
    code = cst.Module(body=[]).code_for_node(default)
    if code in ("None", "True", "False"):
        return f"{name} is {code}", f"{name} is not {code}"
    return f"{name} == {code}", f"{name} != {code}"


def _required(target: Target) -> str:
    names = ", ".join(p.name for p in target.delta.required)
    return f"B added {names} with no default: a value is needed (both signatures below)"


def _order(target: Target, classes: Mapping[str, cst.ClassDef]) -> int:
    """How deep the target's class sits among the file's classes (a module's function: after them all)."""
    owner = target.qualname.rpartition(".")[0]
    if owner not in classes:
        return len(classes) + 1
    depth, seen = 0, {owner}
    cls = classes[owner]
    while cls.bases:
        base = cst.Module(body=[]).code_for_node(cls.bases[0].value)
        if base not in classes or base in seen:
            break
        seen.add(base)
        cls, depth = classes[base], depth + 1
    return depth


def _vllm_imports(tree: ast.Module) -> dict[str, str]:
    """The file's top-level names imported from vLLM (``from vllm.x import Y as Z``: ``Z`` -> ``vllm.x.Y``;
    ``import vllm.x as m``: ``m`` -> ``vllm.x``)."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "vllm":
            out |= {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names if a.name != "*"}
        elif isinstance(node, ast.Import):
            out |= {a.asname or a.name.split(".")[0]: a.name for a in node.names if a.name.split(".")[0] == "vllm"}
    return out


def _one(
    target: Target, fn: cst.FunctionDef, reader: Reader, top: set[str], edits: Edits
) -> tuple[list[str], cst.Parameters, tuple[str, bool] | None, bool]:
    """The edits of one function (into ``edits``), in words; its parameters after them; why what was not
    written was not (and whether a person must act); and whether the edits leave A's calls as they were."""
    delta = target.delta
    written: list[str] = []
    problems: list[tuple[str, bool]] = []
    a_safe = True  # what is written leaves every call A's code makes as it was
    new_params = fn.params
    own = reader.own
    for old, new in delta.renamed:
        if old not in own or new in own:
            continue
        new_params = renamed_param(new_params, old, new)
        for read in reader.reads(old):
            edits.names[id(read)] = new
        a_safe = False  # A's callers pass it by its old name
        written.append(f"renamed {old} -> {new} (B's name), where the body reads it")
        written += reader.rename_forward(old, new, edits)
    for gone in delta.removed:
        if gone not in own:
            continue
        dropped, by_position = reader.drop_forward(gone, edits)
        a_safe = a_safe and not dropped  # A's function still wants what is no longer sent
        written += dropped
        if by_position:
            problems.append((f"{gone}, which B removed, goes to B's function by position: {by_position}", True))
    # A function taking any keyword (``**kwargs``) takes an added one already, and sends it on as it sends them.
    for p in () if reader.any_keyword else delta.added:
        if p.name in own:
            continue
        positional = target.passed.get(p.name)
        if positional is None:
            continue  # B's own calls do not pass it: nothing at B needs it
        placed = _place(new_params, p, target.b_node, positional)
        default = _expression(p.default, top)
        if isinstance(placed, str) or default is None:
            problem = placed if isinstance(placed, str) else "its default reads a name of B's module the file lacks"
            problems.append((f"B added {p.name}: {problem}", True))
            continue
        put, unreached = placed
        a_safe = a_safe and unreached
        forwards, not_to = reader.forward(p.name, _defaulted(p.name, default), edits)
        if not forwards:
            why = (
                f"B added {p.name}={ast.unparse(p.default) if p.default else ''} and its callers pass it; the "
                "function forwards nothing of it (to super(), the original, a keyword dict, a constructor taking "
                "it): taking it and dropping it would change what B asked for"
            )
            problems.append((why, True))
            continue
        annotation = _expression(p.annotation, top) if _annotated(fn) else None
        new_params = put(_param(p.name, annotation, default))
        written.append(f"took {_shown(p.name, annotation, default)} (B's place and default)")
        written += [f"forwarded {p.name} to {where} (when it is not the default)" for where in forwards]
        written += [f"not forwarded to {where}: it does not take {p.name}" for where in not_to]
    if new_params is not fn.params:
        edits.params[id(fn.params)] = new_params
    why = "; ".join(w for w, _ in problems)
    return written, new_params, ((why, any(work for _, work in problems)) if why else None), a_safe


class _Defs(cst.CSTVisitor):
    """Every def of the file by qualified name, in order (a nested function's has ``<locals>``)."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.found: dict[str, list[cst.FunctionDef]] = {}

    def nth(self, qualname: str, n: int) -> cst.FunctionDef | None:
        defs = self.found.get(qualname, [])
        return defs[n] if 0 <= n < len(defs) else None

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.stack.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.found.setdefault(".".join([*self.stack, node.name.value]), []).append(node)
        self.stack.append(f"{node.name.value}.<locals>")

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()


def occurrence(text: str, qualname: str, line: int) -> int:
    """Which def of ``qualname`` in ``text`` starts at ``line`` (its ``def`` or a decorator's line); -1: none.
    Defs are counted in the order ``_Defs`` finds them (the source's)."""
    found: list[tuple[str, int, int]] = []

    class Defs(ast.NodeVisitor):
        def __init__(self) -> None:
            self.stack: list[str] = []

        def visit_ClassDef(self, node: ast.ClassDef) -> None:
            self.stack.append(node.name)
            self.generic_visit(node)
            self.stack.pop()

        def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found.append((".".join([*self.stack, node.name]), first, node.lineno))
            self.stack.append(f"{node.name}.<locals>")
            self.generic_visit(node)
            self.stack.pop()

        visit_AsyncFunctionDef = visit_FunctionDef

    Defs().visit(newer_syntax.parse(text, "<tree>")[0])
    mine = [(first, at) for name, first, at in found if name == qualname]
    return next((n for n, (first, at) in enumerate(mine) if first <= line <= at), -1)


def _top_names(tree: ast.Module) -> set[str]:
    """What the file binds at its top (any branch): what a default or an annotation it is given may read."""
    out = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out


def _annotated(fn: cst.FunctionDef) -> bool:
    return any(
        p.annotation is not None for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)
    )


def _expression(node: ast.expr | None, top: set[str]) -> cst.BaseExpression | None:
    """B's default or annotation as the file can write it: every name it reads bound in the file (else None)."""
    if node is None:
        return None
    reads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    if reads - top:
        return None
    return cst.parse_expression(ast.unparse(node))


def _shown(name: str, annotation: cst.BaseExpression | None, default: cst.BaseExpression) -> str:
    code = cst.Module(body=[]).code_for_node
    head = f"{name}: {code(annotation)}" if annotation is not None else name
    return f"{head} = {code(default)}" if annotation is not None else f"{head}={code(default)}"


def _param(name: str, annotation: cst.BaseExpression | None, default: cst.BaseExpression) -> cst.Param:
    if annotation is None:
        return cst.Param(cst.Name(name), default=default, equal=TIGHT)
    return cst.Param(cst.Name(name), annotation=cst.Annotation(annotation), default=default)


def _place(
    ps: cst.Parameters, p: signature.Parameter, b_node: signature.FunctionNode, positional: bool
) -> tuple[Callable[[cst.Param], cst.Parameters], bool] | str:
    """Where ``p`` goes in the tree's parameters: after the nearest of B's parameters before it the tree has,
    in the same part (positional, keyword-only); a function putting it there, and whether no call A's code
    makes can reach it (keyword-only, or after every positional parameter with no ``*args`` to take more),
    or why it has no place."""
    b = signature.parameters(b_node)
    before = [q.name for q in b[: [q.name for q in b].index(p.name)]]
    if p.kind == "keyword_only" and (ps.kwonly_params or ps.star_arg is not cst.MaybeSentinel.DEFAULT):
        part, field_name = list(ps.kwonly_params), "kwonly_params"
    else:
        part, field_name = list(ps.params), "params"
    names = [q.name.value for q in part]
    at = max((names.index(n) + 1 for n in before if n in names), default=0 if not part else -1)
    if at < 0:
        at = len(part)  # none of B's parameters before it is here: after the tree's own
    if field_name == "params" and any(q.default is None for q in part[at:]):
        return "a parameter with no default follows its place in the tree's signature"
    if positional and field_name == "params" and len(ps.posonly_params) + at != p.index:
        return (
            f"B's callers pass it by position (its place {p.index}), the tree's parameters put it at "
            f"{len(ps.posonly_params) + at}"
        )

    def put(new: cst.Param) -> cst.Parameters:
        return ps.with_changes(**{field_name: inserted(part, at, new)})

    unreached = field_name == "kwonly_params" or (at == len(part) and not isinstance(ps.star_arg, cst.Param))
    return put, unreached

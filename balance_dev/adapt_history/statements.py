"""Functions of a module paired by qualified name, reduced to flat statement keys, and compared three ways.

Written with stdlib ``ast`` apart from ``generator.judge.resync`` on purpose: the figures judge the
merge, so they must not share its reading. A function is the sequence of its statements, a compound
statement standing for its header (its child blocks emptied) followed by the statements of those
blocks; the ``def`` itself is one statement (name, arguments, decorators, return annotation), and a
docstring is none. Keys are ``ast.dump`` without positions, so formatting and comments never count,
nor how an annotation is spelled: ``Optional[X]``/``Union[X, Y]``/``List[X]`` read as ``X | None``/
``X | Y``/``list[X]`` (the same to a type checker; vLLM respelled its annotations so, and a copy taken
before did not).
"""

from __future__ import annotations

import ast
import copy
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")
Func = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Located:
    qualname: str
    index: int  # among the module's defs of the same qualified name, in source order
    line: int  # the ``def`` line
    first: int  # the first decorator's line, else the ``def`` line
    node: Func


def functions(tree: ast.Module) -> list[Located]:
    """Every ``def`` of the module (methods, nested ``<locals>``, those under ``if``/``try``), in source order."""
    out: list[Located] = []
    seen: Counter[str] = Counter()

    def visit(body: Sequence[ast.AST], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualname = prefix + node.name
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                out.append(Located(qualname, seen[qualname], node.lineno, first, node))
                seen[qualname] += 1
                visit(node.body, f"{qualname}.<locals>.")
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            else:
                for name in _BLOCKS:
                    children = getattr(node, name, None)
                    if isinstance(children, list):
                        visit(children, prefix)

    visit(tree.body, "")
    return sorted(out, key=lambda f: (f.line, f.qualname))


def at_line(tree: ast.Module, line: int) -> Located | None:
    """The function whose ``def`` (or first decorator) is on ``line``."""
    return next((f for f in functions(tree) if line in (f.line, f.first)), None)


def named(tree: ast.Module, qualname: str, index: int = 0) -> Located | None:
    same = [f for f in functions(tree) if f.qualname == qualname]
    if not same:
        return None
    return same[index] if index < len(same) else same[-1]


def _docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _header(node: ast.AST) -> str:
    shown = copy.copy(node)
    for name in _BLOCKS:
        if isinstance(getattr(shown, name, None), list):
            setattr(shown, name, [])
    return ast.dump(shown, include_attributes=False)


def _keys(body: Sequence[ast.AST], *, skip_docstring: bool) -> Iterator[str]:
    for i, stmt in enumerate(body):
        if skip_docstring and i == 0 and isinstance(stmt, ast.stmt) and _docstring(stmt):
            continue
        yield _header(stmt)
        nested = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        for name in _BLOCKS:
            children = getattr(stmt, name, None)
            if isinstance(children, list):
                yield from _keys(children, skip_docstring=nested and name == "body")


def keys(func: ast.AST) -> list[str]:
    """The function as its flat statement keys: its ``def`` line first, docstrings left out."""
    return list(_keys([_respelled(func)], skip_docstring=False))


_GENERICS = {"List": "list", "Dict": "dict", "Tuple": "tuple", "Set": "set", "FrozenSet": "frozenset", "Type": "type"}


def _respelled(func: ast.AST) -> ast.AST:
    """A copy of ``func`` whose annotations (parameters', returns', annotated assignments') use ``|`` and
    the builtin generics."""
    out = copy.deepcopy(func)
    for node in ast.walk(out):
        for field in ("annotation", "returns"):
            value = getattr(node, field, None)
            if isinstance(value, ast.expr):
                setattr(node, field, _meaning(value))
    return out


def _meaning(expr: ast.expr) -> ast.expr:
    for field, value in ast.iter_fields(expr):
        if isinstance(value, ast.expr):
            setattr(expr, field, _meaning(value))
        elif isinstance(value, list):
            setattr(expr, field, [_meaning(v) if isinstance(v, ast.expr) else v for v in value])
    if not isinstance(expr, ast.Subscript):
        return expr
    head = expr.value
    name = head.id if isinstance(head, ast.Name) else head.attr if isinstance(head, ast.Attribute) else ""
    if isinstance(head, ast.Attribute) and not (isinstance(head.value, ast.Name) and head.value.id == "typing"):
        return expr
    members = list(expr.slice.elts) if isinstance(expr.slice, ast.Tuple) else [expr.slice]
    if name == "Optional":
        members = [expr.slice, ast.Constant(None)]
    if name in ("Optional", "Union") and members:
        joined = members[0]
        for member in members[1:]:
            joined = ast.BinOp(joined, ast.BitOr(), member)
        return joined
    if name in _GENERICS:
        return ast.Subscript(ast.Name(_GENERICS[name], ast.Load()), expr.slice, ast.Load())
    return expr


def plain(func: ast.AST) -> tuple[str, ...]:
    """What "equal" means for two functions here: the same statement keys in the same order."""
    return tuple(keys(func))


@dataclass(frozen=True)
class Check:
    """What a written copy lacks against A with both sides' changes: each list holds statement keys."""

    missing_upstream: tuple[str, ...]  # a statement B added that the result does not hold
    kept_removed: tuple[str, ...]  # a statement B removed, which the copy had kept, still in the result
    missing_own: tuple[str, ...]  # a statement the copy added that the result lost
    undone_own: tuple[str, ...]  # a statement the copy had removed, back in the result
    other: tuple[str, ...]  # a statement neither side changed whose count differs in the result

    @property
    def holds(self) -> bool:
        return not (self.missing_upstream or self.kept_removed or self.missing_own or self.undone_own or self.other)


def _combined(upstream: int, own: int) -> int:
    """Both sides' change of one statement's count: the same change made by both counts once."""
    if upstream and own and (upstream > 0) == (own > 0):
        return upstream if abs(upstream) >= abs(own) else own
    return upstream + own


def check(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str], result: Sequence[str]) -> Check:
    """``result`` against A (``base``) with B's (``theirs``) and the copy's (``ours``) changes, statement by statement.

    Counted as multisets of keys: what each side added or removed, and how many of each statement the
    result must then hold. The order of statements is not judged here.
    """
    a, c, b, r = Counter(base), Counter(ours), Counter(theirs), Counter(result)
    missing_up, kept, missing_own, undone, other = [], [], [], [], []
    for key in sorted(set(a) | set(b) | set(c) | set(r)):
        upstream, own = b[key] - a[key], c[key] - a[key]
        expected = a[key] + _combined(upstream, own)
        if upstream > 0 and r[key] < expected:
            missing_up.append(key)
        if upstream < 0 and own >= 0 and r[key] > expected:
            kept.append(key)
        if own > 0 and r[key] < expected:
            missing_own.append(key)
        if own < 0 and r[key] > expected:
            undone.append(key)
        if not upstream and not own and r[key] != expected:
            other.append(key)
    return Check(tuple(missing_up), tuple(kept), tuple(missing_own), tuple(undone), tuple(other))


def taken(base: Sequence[str], theirs: Sequence[str], old: Sequence[str], new: Sequence[str]) -> Counter[str]:
    """Upstream statements a re-sync took: B's statements not in A's function that ``new`` gained over ``old``."""
    a, b, o, n = Counter(base), Counter(theirs), Counter(old), Counter(new)
    out: Counter[str] = Counter()
    for key in b:
        count = min(b[key] - a[key], n[key] - o[key])
        if count > 0:
            out[key] = count
    return out


def held(wanted: Counter[str], old: Sequence[str], result: Sequence[str]) -> int:
    """How many of ``wanted`` the result gained over ``old`` too."""
    o, r = Counter(old), Counter(result)
    return sum(min(n, max(0, r[k] - o[k])) for k, n in wanted.items())

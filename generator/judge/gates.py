"""A tree's own vLLM version gates, read and evaluated at a release: which of its code runs on which vLLM.

A plugin that runs on two vLLMs at once writes gates in its own idiom: a helper of its own that asks the
installed vLLM's version (vllm-ascend's ``vllm_version_is("0.30.0")``), called in an ``if`` test, a
conditional expression, a ``pytest.mark.skipif``. The helper is found in the tree (a function whose body
reads vLLM's version and compares it with its one argument: ``==`` makes it *is*, ``>=`` *at least*, and
so on), or declared; never assumed by its name.

A gate's test is read into a small form (``Cond``) that folds at a release: a helper's call with a string
constant is true or false there; ``not``, ``and``, ``or`` and constants fold as Python does; anything else is
unknown and makes no branch dead. ``impact`` asks which code runs at a release (``Region``); ``adapt``
retires gates a release makes dead and writes new ones in the same idiom.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from generator.tags import VersionKey, version_key

# A test as read: ("gate", helper path, version) | ("not", c) | ("and", c...) | ("or", c...) | ("const", bool)
# | ("unknown",)
Cond = tuple[object, ...]
UNKNOWN: Cond = ("unknown",)

_OPS: dict[type[ast.cmpop], str] = {
    ast.Eq: "==",
    ast.GtE: ">=",
    ast.Gt: ">",
    ast.LtE: "<=",
    ast.Lt: "<",
    ast.NotEq: "!=",
}
_COMPARE: dict[str, Callable[[VersionKey, VersionKey], bool]] = {
    "==": operator.eq,
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "!=": operator.ne,
}
_MIRROR = {"==": "==", "!=": "!=", ">=": "<=", "<=": ">=", ">": "<", "<": ">"}


@dataclass(frozen=True)
class Region:
    """Lines of a file that run only where ``cond`` holds (an ``if``'s body, its ``else`` under ``not``)."""

    first: int
    last: int
    cond: Cond
    line: int = 0  # the gate's own line (the ``if``, the decorator)


def helper_op(func: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """How a function of the tree compares the installed vLLM's version with its one argument (``==`` for a
    ``vllm_version_is``, ``>=`` for an "at least"), or None when it is no such helper: it must take one
    argument, read vLLM's version (``vllm.__version__``, ``version("vllm")``) and return a comparison of it
    with that argument (or return True where an ``if`` compares them), one way only."""
    params = [*func.args.posonlyargs, *func.args.args]
    required = len(params) - len(func.args.defaults)
    if len(params) < 1 or required != 1 or func.args.vararg or func.args.kwonlyargs:
        return None
    if not any(_reads_vllm_version(node) for node in ast.walk(func)):
        return None
    argument = params[0].arg
    found: set[str] = set()
    # what decides the answer: what it returns, and the test of an ``if`` whose block returns True
    # (``if parsed == Version(wanted): return True``)
    returned = [n.value for n in ast.walk(func) if isinstance(n, ast.Return) and n.value is not None]
    returned += [n.test for n in ast.walk(func) if isinstance(n, ast.If) and _returns_true(n.body)]
    for node in (c for r in returned for c in ast.walk(r)):
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            continue
        op = _OPS.get(type(node.ops[0]))
        left, right = node.left, node.comparators[0]
        if op is None:
            continue
        if _mentions(right, argument) and not _mentions(left, argument):
            found.add(op)
        elif _mentions(left, argument) and not _mentions(right, argument):
            found.add(_MIRROR[op])  # ``wanted <= installed`` is ``installed >= wanted``
    return found.pop() if len(found) == 1 else None


def _returns_true(body: list[ast.stmt]) -> bool:
    return any(isinstance(s, ast.Return) and isinstance(s.value, ast.Constant) and s.value.value is True for s in body)


def _reads_vllm_version(node: ast.AST) -> bool:
    """``vllm.__version__``, or ``version("vllm")`` (``importlib.metadata``'s, under any name it is imported)."""
    if isinstance(node, ast.Attribute) and node.attr == "__version__":
        return isinstance(node.value, ast.Name) and node.value.id == "vllm"
    if isinstance(node, ast.Call) and len(node.args) == 1 and isinstance(node.args[0], ast.Constant):
        func = node.func
        named = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return named == "version" and node.args[0].value == "vllm"
    return False


def _mentions(expr: ast.expr, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(expr))


def condition(expr: ast.expr, callee: Callable[[ast.expr], Sequence[str]]) -> Cond:
    """``expr`` (an ``if`` test) read as a ``Cond``; ``callee`` names what a call's function is (dotted paths)."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        return ("not", condition(expr.operand, callee))
    if isinstance(expr, ast.BoolOp):
        return ("and" if isinstance(expr.op, ast.And) else "or", *(condition(v, callee) for v in expr.values))
    if isinstance(expr, ast.Constant) and isinstance(expr.value, bool):
        return ("const", expr.value)
    if (
        isinstance(expr, ast.Call)
        and len(expr.args) == 1
        and not expr.keywords
        and isinstance(expr.args[0], ast.Constant)
        and isinstance(expr.args[0].value, str)
    ):
        paths = sorted(callee(expr.func))
        if len(paths) == 1:
            return ("gate", paths[0], expr.args[0].value)
    return UNKNOWN


def evaluate(cond: Cond, helpers: Mapping[str, str], version: str) -> bool | None:
    """``cond`` at vLLM ``version`` (``0.30.0``; a tag's ``v`` is dropped); None: not known statically."""
    kind = cond[0]
    if kind == "const":
        return bool(cond[1])
    if kind == "gate":
        op = helpers.get(str(cond[1]))
        if op is None:
            return None
        try:  # a local segment (``0.30.0+empty``) is a build's, not the release's: the helper drops it too
            return _COMPARE[op](version_key(version.removeprefix("v").split("+")[0]), version_key(str(cond[2])))
        except ValueError:
            return None
    if kind == "not":
        inner = evaluate(cond[1], helpers, version)  # type: ignore[arg-type]
        return None if inner is None else not inner
    if kind in ("and", "or"):
        values = [evaluate(c, helpers, version) for c in cond[1:]]  # type: ignore[arg-type]
        stop = kind == "or"  # a True ends an ``or``, a False an ``and``
        if stop in values:
            return stop
        return None if None in values else not stop
    return None


_ALWAYS: dict[str, Callable[[int], bool | None]] = {
    # how the gate compares, and where its release stands against the floor (-1 older, 0 the floor, 1 newer)
    # -> its value at every release from the floor on, or None (it differs among them: live)
    "==": lambda side: False if side < 0 else None,
    "!=": lambda side: True if side < 0 else None,
    ">=": lambda side: True if side <= 0 else None,
    ">": lambda side: True if side < 0 else None,
    "<": lambda side: False if side <= 0 else None,
    "<=": lambda side: False if side < 0 else None,
}


def dead_value(op: str, release: str, floor: str) -> bool | None:
    """A gate's value at every release from ``floor`` on, when it is one (None: it is live)."""
    try:
        mine, low = version_key(release.removeprefix("v")), version_key(floor.removeprefix("v"))
    except ValueError:
        return None
    side = (mine > low) - (mine < low)
    return _ALWAYS.get(op, lambda _: None)(side)


def names_gate(cond: Cond) -> bool:
    """The test calls a gate helper somewhere (an ``if`` on anything else is no gate)."""
    kind = cond[0]
    if kind == "gate":
        return True
    return kind in ("not", "and", "or") and any(names_gate(c) for c in cond[1:])  # type: ignore[arg-type]


def regions(body: Sequence[ast.stmt], callee: Callable[[ast.expr], Sequence[str]]) -> list[Region]:
    """Every part of ``body`` that runs only under a test naming a gate helper: an ``if``'s body (and its
    ``else`` under ``not``), each side of a conditional expression, a function a ``skipif`` skips."""
    out: list[Region] = []
    for node in _walk(body):
        if isinstance(node, (ast.If, ast.IfExp)):
            cond = condition(node.test, callee)
            if not names_gate(cond):
                continue
            yes, no = (node.body, node.orelse) if isinstance(node, ast.If) else ([node.body], [node.orelse])
            for block, holds in ((yes, cond), (no, ("not", cond))):
                if block:
                    out.append(Region(block[0].lineno, _last(block), holds, node.lineno))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:
                skip = _skipif(decorator, callee)
                if skip is not None:
                    out.append(Region(node.lineno, node.end_lineno or node.lineno, ("not", skip), decorator.lineno))
    return out


def _skipif(decorator: ast.expr, callee: Callable[[ast.expr], Sequence[str]]) -> Cond | None:
    """``@pytest.mark.skipif(<gate>, ...)``'s test, when it names a gate helper."""
    if not (isinstance(decorator, ast.Call) and decorator.args):
        return None
    func = decorator.func
    if not (isinstance(func, ast.Attribute) and func.attr == "skipif"):
        return None
    cond = condition(decorator.args[0], callee)
    return cond if names_gate(cond) else None


def releases(cond: Cond) -> list[tuple[str, str]]:
    """The gate calls a test makes: (helper, release)."""
    if cond[0] == "gate":
        return [(str(cond[1]), str(cond[2]))]
    if cond[0] in ("not", "and", "or"):
        return [found for c in cond[1:] for found in releases(c)]  # type: ignore[arg-type]
    return []


def runs_at(line: int, found: Sequence[Region], helpers: Mapping[str, str], version: str) -> bool:
    """Whether the file's ``line`` runs at ``version``: False when a region holding it is false there."""
    return all(evaluate(r.cond, helpers, version) is not False for r in found if r.first <= line <= r.last)


def _last(block: Sequence[ast.AST]) -> int:
    last = block[-1]
    end: int | None = getattr(last, "end_lineno", None)
    return end if end is not None else int(getattr(last, "lineno", 0))


def _walk(body: Sequence[ast.stmt]) -> Iterator[ast.AST]:
    for stmt in body:
        yield from ast.walk(stmt)

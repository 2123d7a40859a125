"""How B changed one function's parameters from A's, as ``adapt`` follows them into the tree's function.

- added: a parameter B has and A had not; with a default it can be taken without a caller changing; without
  one a value is needed (``required``: never guessed);
- renamed: at the same place among the positional parameters, the same default (or none), A's name gone from
  B and B's new to A, and B's body reading the new name (else it is one dropped and another added);
- removed: a parameter A had and B has not (and not renamed).

``*args`` and ``**kwargs`` are not parameters here: they take what they take at A and B alike.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Parameter:
    name: str
    kind: str  # positional_only | positional | keyword_only
    index: int  # its place among the positional parameters (-1: keyword-only)
    default: ast.expr | None
    annotation: ast.expr | None


@dataclass(frozen=True)
class Delta:
    added: tuple[Parameter, ...]  # B's, each with its default
    required: tuple[Parameter, ...]  # B's, added with no default
    renamed: tuple[tuple[str, str], ...]  # (A's name, B's)
    removed: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.added or self.required or self.renamed or self.removed)


def parameters(node: FunctionNode) -> list[Parameter]:
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = [
        Parameter(a.arg, "positional_only" if i < len(args.posonlyargs) else "positional", i, d, a.annotation)
        for i, (a, d) in enumerate(zip(positional, defaults, strict=True))
    ]
    out += [
        Parameter(a.arg, "keyword_only", -1, d, a.annotation)
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    return out


def takes_any_keyword(node: FunctionNode) -> bool:
    return node.args.kwarg is not None


def delta(old: FunctionNode, new: FunctionNode) -> Delta:
    a, b = parameters(old), parameters(new)
    a_names, b_names = {p.name for p in a}, {p.name for p in b}
    reads = {n.id for n in ast.walk(new) if isinstance(n, ast.Name)}
    renamed: list[tuple[str, str]] = []
    for pa in a:
        if pa.name in b_names or pa.index < 0:
            continue
        pb = next((p for p in b if p.index == pa.index and p.kind == pa.kind), None)
        if pb is None or pb.name in a_names or pb.name not in reads:
            continue
        if _text(pa.default) == _text(pb.default):
            renamed.append((pa.name, pb.name))
    gone = {old_name for old_name, _ in renamed}
    came = {new_name for _, new_name in renamed}
    fresh = [p for p in b if p.name not in a_names and p.name not in came]
    return Delta(
        added=tuple(p for p in fresh if p.default is not None),
        required=tuple(p for p in fresh if p.default is None),
        renamed=tuple(renamed),
        removed=tuple(p.name for p in a if p.name not in b_names and p.name not in gone),
    )


def _text(node: ast.expr | None) -> str | None:
    return None if node is None else ast.unparse(node)


def def_line(node: FunctionNode) -> str:
    """The ``def`` line alone, as ``ast.unparse`` writes it (no body, no decorators)."""
    shown = copy.copy(node)  # a shallow copy: the shared node is not changed in place
    shown.body, shown.decorator_list = [ast.Pass()], []
    return ast.unparse(shown).splitlines()[0]

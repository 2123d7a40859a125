"""What B's own calls of a definition pass it: the question ``adapt`` asks before it gives the tree's function
a parameter B added (by place, by keyword, or not at all), answered from ``calls``' one index of B's calls."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from generator.judge.couplings.calls import NAME, CallIndex
from generator.judge.couplings.upstream import Definition


@dataclass(frozen=True)
class Passes:
    """What B's own calls of a definition pass it, as ``adapt`` asks before it gives the tree's function a
    parameter B added: the furthest place they fill by position (counting what a bound call binds first), the
    keywords they name, whether one spreads ``**x`` (any keyword, then), and how many calls were found."""

    reach: int
    keywords: frozenset[str]
    double_star: bool
    calls: int

    def passed(self, name: str, index: int) -> bool | None:
        """Does a call pass parameter ``name`` (at ``index`` among the positional ones, -1 keyword-only): by
        position too (True), by keyword only (False), or not at all (None)."""
        if 0 <= index < self.reach:
            return True
        if name in self.keywords or self.double_star:
            return False
        return None


_ANY = 1 << 16  # a ``*x`` fills every positional slot


def of(index: CallIndex, definition: Definition, owner: str | None, patched: bool) -> Passes:
    """What the calls of this release's code that reach a tree function put in ``definition``'s place pass it;
    for an ``__init__``, the calls constructing its class (``reaching`` leaves dunders to Python)."""
    node = definition.node
    method = owner is not None and "." in definition.qualname
    if definition.qualname.endswith("__init__") and method:
        cls = index.resolver.resolve(definition.name.rpartition(".")[0])
        found = index.reaching(cls, None, False) if isinstance(cls, Definition) else []
        first = [1] * len(found)  # the instance is made, then bound first
    else:
        found = index.reaching(definition, owner, patched)
        kind = _decorated(node) if method else "static"
        first = [0 if kind == "static" else 1 if kind == "class" or c.form != NAME else 0 for c in found]
    reach = max((_ANY if c.call.star else c.call.positional + f for c, f in zip(found, first, strict=True)), default=0)
    keywords = frozenset(k for c in found for k in c.call.keywords)
    return Passes(reach, keywords, any(c.call.double_star for c in found), len(found))


def _decorated(node: ast.AST | None) -> str:
    decorators = getattr(node, "decorator_list", [])
    names = {d.id if isinstance(d, ast.Name) else getattr(d, "attr", "") for d in decorators}
    return "static" if "staticmethod" in names else "class" if "classmethod" in names else "plain"

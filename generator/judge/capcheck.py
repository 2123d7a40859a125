"""The running-cap check of a ``schedule()`` read with stdlib ``ast``, and what a difference in it means.

``migrate`` reads it from a hand copy and from upstream to say, in words, what a stale copy's (or
a hand-written gate's) question misses: a term of the count, another operator, another cap. The
shapes accepted are the generator's own (``LeaderAtCapFreezes.COUNTS/OPERATORS/CAPS``): one list.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from generator.builder.copy_forms import COUNT_TERMS
from generator.builder.deltas import LeaderAtCapFreezes, shape_of, shapes
from generator.builder.verify import is_break_if

_LOOPS = (ast.For, ast.While)
# Operators as written, for the words (the generator's data says which ones a cap check may use).
SYMBOLS: dict[type[ast.cmpop], str] = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}


@dataclass(frozen=True)
class CapCheck:
    count: str  # the count compared, resolved through ``name = ...`` right before the check
    operator: str
    cap: str  # the code compared with, e.g. ``self.max_num_running_reqs``


def _loop_bodies(func: ast.FunctionDef) -> Iterator[list[ast.stmt]]:
    for owner in ast.walk(func):
        if isinstance(owner, _LOOPS):
            yield owner.body


def find(func: ast.FunctionDef) -> CapCheck | None:
    """Upstream's running-cap check in the WAITING loop (a break or a stop flag), when exactly one is known."""
    counts = shapes(LeaderAtCapFreezes.COUNTS)  # the generator's own shapes, parsed once
    found = []
    for block in _loop_bodies(func):
        for index, stmt in enumerate(block):
            for test in _questions(stmt):
                if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
                    continue
                operator = LeaderAtCapFreezes.OPERATORS.get(type(test.ops[0]))
                (limit,) = test.comparators
                if not (
                    operator is not None
                    and isinstance(limit, ast.Attribute)
                    and isinstance(limit.value, ast.Name)
                    and limit.value.id == "self"
                    and limit.attr in LeaderAtCapFreezes.CAPS
                ):
                    continue
                count = _resolve(block, index, test.left)
                if count is not None and shape_of(count) in counts:
                    found.append(CapCheck(ast.unparse(count), operator, ast.unparse(limit)))
    return found[0] if len(found) == 1 else None


def _questions(stmt: ast.stmt) -> list[ast.expr]:
    """What a statement asks that can stop admission: a break's test, or a stop flag's disjuncts (0.34+)."""
    if is_break_if(stmt):
        return [stmt.test]  # type: ignore[attr-defined]
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and stmt.targets[0].id in LeaderAtCapFreezes.STOP_FLAGS
    ):
        value = stmt.value
        return list(value.values) if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or) else [value]
    return []


def _resolve(block: list[ast.stmt], index: int, left: ast.expr) -> ast.expr | None:
    if not isinstance(left, ast.Name):
        return left
    before = block[index - 1] if index > 0 else None
    if (
        isinstance(before, ast.Assign)
        and len(before.targets) == 1
        and isinstance(before.targets[0], ast.Name)
        and before.targets[0].id == left.id
    ):
        return before.value
    return None


def terms(count: str) -> list[str]:
    """The summands of a count, as code: ``a + b`` -> ``[a, b]``."""
    out: list[str] = []

    def walk(node: ast.expr) -> None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            walk(node.left)
            walk(node.right)
        else:
            out.append(ast.unparse(node))

    walk(ast.parse(count, mode="eval").body)
    return out


@dataclass(frozen=True)
class Difference:
    """One way a question differs from upstream's cap check."""

    kind: str  # "lacks" (a term of upstream's count), "adds" (a term upstream does not count), "operator", "cap"
    theirs: str
    ours: str

    @property
    def words(self) -> str:
        term = self.theirs if self.kind == "lacks" else self.ours
        return COUNT_TERMS.get(term, f"`{term}`")

    def sentence(self, upstream: str, copy: str, effects: dict[str, str]) -> str:
        """In words; ``effects`` adds what it means, by kind (``{what}``: the term's words)."""
        if self.kind == "lacks":
            text = f"{upstream} counts {self._term(self.theirs)}, {copy} does not"
        elif self.kind == "adds":
            text = f"{copy} counts {self._term(self.ours)}, {upstream} does not"
        elif self.kind == "operator":
            text = f"{upstream} stops at `{self.theirs}` the cap, {copy} at `{self.ours}`"
        else:
            text = f"{upstream} compares with `{self.theirs}`, {copy} with `{self.ours}`"
        effect = effects.get(self.kind if self.kind != "operator" else f"{self.theirs} {self.ours}")
        return f"{text}: {effect.format(what=self.words)}" if effect else text

    @property
    def short(self) -> str:
        if self.kind == "lacks":
            return f"misses {self.words}"
        if self.kind == "adds":
            return f"also counts {self.words}"
        return f"`{self.ours}` where upstream has `{self.theirs}`"

    @staticmethod
    def _term(term: str) -> str:
        words = COUNT_TERMS.get(term)
        return f"{words} (`{term}`)" if words else f"`{term}`"


def differences(theirs: CapCheck, count: str | None, operator: str, cap: str) -> list[Difference]:
    """Every way ``count operator cap`` asks another question than ``theirs`` (``count`` None: not compared)."""
    out = []
    if count is not None:
        a, b = terms(theirs.count), terms(count)
        out += [Difference("lacks", t, "") for t in a if t not in b]
        out += [Difference("adds", "", t) for t in b if t not in a]
    if operator != theirs.operator:
        out.append(Difference("operator", theirs.operator, operator))
    if shape_of(ast.parse(cap, mode="eval").body) != shape_of(ast.parse(theirs.cap, mode="eval").body):
        out.append(Difference("cap", theirs.cap, cap))
    return out

"""The three balance deltas, each a small libcst transform with a structural anchor.

An anchor is declared as the upstream code it must find, compared structurally (as a stdlib
``ast`` dump: formatting and comments do not matter, anything else does). It must match exactly
once. Zero or several matches raise ``DeltaDoesNotApply`` naming the delta, the tag, what was
looked for, and the upstream lines where it was expected: the generator never guesses. Retiring
or re-anchoring a delta for newer tags is a change to this file (and to its twin in
generator/builder/verify.py).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import ClassVar

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from generator.builder import copy_forms
from generator.builder.anchors import Hit, blocks, find, replace, same_code, small, with_block_body
from generator.builder.copy_forms import LEADER_COUNT
from generator.builder.extract import CLASS_NAME, METHOD_NAME
from generator.errors import DeltaDoesNotApply, UpstreamShapeError

_LOOPS = (cst.While, cst.For)


@dataclass
class DeltaContext:
    """What a delta needs besides the method: the tag and upstream, to report where it looked."""

    tag: str
    module: cst.Module
    # upstream's method as parsed: failures point at its lines (patched nodes have no position)
    method: cst.FunctionDef | None = None
    _positions: dict[cst.CSTNode, object] | None = field(default=None, repr=False)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def lines_of(self, node: cst.CSTNode) -> tuple[int, int] | None:
        # Positions are resolved only on failure: the happy path never pays for the metadata pass.
        if self._positions is None:
            wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
            self._positions = dict(wrapper.resolve(PositionProvider))
        pos = self._positions.get(node)
        return None if pos is None else (pos.start.line, pos.end.line)  # type: ignore[attr-defined]

    def line_label(self, node: cst.CSTNode) -> str:
        """``line N: `` for messages naming an upstream statement ("" for a node that has no position)."""
        span = self.lines_of(node)
        return f"line {span[0]}: " if span else ""

    def excerpt(self, nodes: Sequence[cst.CSTNode], *, before: int = 3, after: int = 8) -> str:
        lines = self.module.code.splitlines()
        chunks = []
        for node in nodes:
            span = self.lines_of(node)
            if span is None:
                continue
            first, last = max(1, span[0] - before), min(len(lines), min(span[1], span[0] + after) + before)
            chunks.append("\n".join(f"{n:>5} | {lines[n - 1]}" for n in range(first, last + 1)))
        return "\n  ...\n".join(chunks)

    def where_expected(self) -> str:
        """Upstream's WAITING loop (its first lines), else the method's start: never an empty context."""
        if self.method is None:
            return ""
        return self.excerpt(_waiting_loops(self.method), after=30) or self.excerpt([self.method])


@dataclass(frozen=True)
class CapCheck:
    """Upstream's running-cap check in the WAITING loop: ``if <count> <operator> self.<cap>: break``.

    Delta 2 asks the same question of the leader, so all three parts come from upstream's code.
    """

    count: str  # upstream's own expression for the slots taken (the per-step gather's payload)
    operator: str
    cap: str  # the attribute upstream compares with, e.g. ``max_num_running_reqs``
    check: str  # upstream's comparison as written, for the header
    assigned: bool  # the count is ``name = <count>`` right before the check (0.25+), not inline
    # What upstream does when its check holds, and so what the leader's gate does: ``break`` (to 0.33), or
    # upstream's own flag set (0.34+: ``loads_only = True``, the mode that admits nothing into RUNNING).
    stop: str = "break"

    def gate(self, leader: str = "") -> str:
        return f"{leader or 'self.' + LEADER_COUNT} {self.operator} self.{self.cap}"

    @property
    def flag(self) -> str | None:
        """The flag upstream's check sets (``loads_only``), or None where the check breaks."""
        return None if self.stop == "break" else self.stop.split("=")[0].strip()


@dataclass(frozen=True)
class Outcome:
    """What one delta did at this tag: the header, ``matrix`` and ``verify`` say the same."""

    number: int
    title: str
    applied: bool
    details: tuple[str, ...] = ()
    cap: CapCheck | None = None


class Delta:
    number: ClassVar[int]
    title: ClassVar[str]
    # Human description of the anchor, used in the failure line.
    looked_for: ClassVar[str]

    def apply(self, method: cst.FunctionDef, ctx: DeltaContext) -> tuple[cst.FunctionDef, Outcome]:
        raise NotImplementedError

    def _outcome(self, *details: str, applied: bool = True, cap: CapCheck | None = None) -> Outcome:
        return Outcome(self.number, self.title, applied, details, cap)

    def _fail(self, ctx: DeltaContext, found: int, near: Sequence[cst.CSTNode]) -> DeltaDoesNotApply:
        what = "not found" if found == 0 else f"found {found} times (ambiguous)"
        return DeltaDoesNotApply(
            f"delta {self.number} ({self.title}) does not apply to {ctx.tag}: {self.looked_for} "
            f"in {CLASS_NAME}.{METHOD_NAME}() {what}; re-anchor it in generator/builder/deltas.py "
            "or keep the current pin",
            delta=self.number,
            detail=ctx.excerpt(near) or ctx.where_expected(),
        )


class DisabledPathDelegates(Delta):
    number = 1
    title = "disabled path returns upstream schedule()"
    looked_for = "a method whose first parameter is self"

    def apply(self, method: cst.FunctionDef, ctx: DeltaContext) -> tuple[cst.FunctionDef, Outcome]:
        params = method.params
        positional = [*params.posonly_params, *params.params]
        if not positional or positional[0].name.value != "self":
            raise self._fail(ctx, 0, [method])
        args = [p.name.value for p in positional[1:]]
        if isinstance(params.star_arg, cst.Param):
            args.append(f"*{params.star_arg.name.value}")
        args += [f"{p.name.value}={p.name.value}" for p in params.kwonly_params]
        if params.star_kwarg is not None:
            args.append(f"**{params.star_kwarg.name.value}")
        call = f"super().{METHOD_NAME}({', '.join(args)})"
        gate = cst.parse_statement(
            "if not self._balance_enabled:  # balance delta 1: balance off -> upstream verbatim\n"
            f"    return {call}  # balance delta 1\n"
        )
        assert isinstance(method.body, cst.IndentedBlock)
        body = list(method.body.body)
        # A docstring must stay the first statement to remain the docstring.
        at = 1 if body and _is_docstring(body[0]) else 0
        body.insert(at, gate)
        return method.with_changes(body=with_block_body(method.body, body)), self._outcome(f"returns `{call}`")


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _expr(ctx: DeltaContext, node: cst.CSTNode) -> ast.expr | None:
    try:
        return ast.parse(f"({ctx.code(node)})", mode="eval").body
    except SyntaxError:
        return None


def one_line(code: str) -> str:
    """Upstream's code on one line, for a header comment or a message: a line break inside brackets is a space."""
    if "\n" not in code:
        return code.strip()
    text = " ".join(line.strip() for line in code.strip().splitlines())
    return re.sub(r" ([)\]}])", r"\1", re.sub(r"([(\[{]) ", r"\1", text))


def breaks(stmt: cst.BaseStatement) -> bool:
    """``if <test>: break``, nothing else: the shape of every admission stop in the WAITING loop."""
    if not (isinstance(stmt, cst.If) and small(stmt)):
        return False
    assert isinstance(stmt.body, cst.IndentedBlock)
    (inner,) = stmt.body.body
    return isinstance(inner, cst.SimpleStatementLine) and [type(s) for s in inner.body] == [cst.Break]


class LeaderAtCapFreezes(Delta):
    number = 2
    title = "leader at cap freezes admission on every rank"
    looked_for = (
        "the WAITING loop's running-cap check, `if <count> <op> self.<cap>: break` or a stop flag "
        "`<flag> = <count> <op> self.<cap> or ...` (count directly or through the assignment just before it)"
    )
    # Every shape upstream's cap check has had, as data compared by ast shape. A new shape fails
    # loudly (exit 4) until a maintainer adds it here and to verify.py's twin.
    COUNTS = ("len(self.running)", "len(self.running) + self.num_waiting_for_streaming_input")
    OPERATORS: ClassVar[dict[type[ast.cmpop], str]] = {ast.Eq: "==", ast.GtE: ">="}
    CAPS = ("max_num_running_reqs", "max_num_active_reqs")
    STOP_FLAGS = copy_forms.STOP_FLAGS  # where upstream's check sets a flag instead: why, in copy_forms.py

    # The gate as code: GATE is the leader's count compared with upstream's cap, ``break`` upstream's stop
    # (at a flag: the flag set). A consumer's tree keeps the form and the leader its own code already uses
    # (copy_forms.py lists the forms); these are ours.
    FORM = "if GATE:\n    break"
    LEADER = f"self.{LEADER_COUNT}"

    def __init__(self, form: str = FORM, leader: str = LEADER) -> None:
        self.form, self.leader = form, leader

    def gate_statements(self, cap: CapCheck) -> list[cst.BaseStatement]:
        """The form's statements with GATE and the stop filled in, every line marked ``# balance delta 2``."""
        code = re.sub(r"\bGATE\b", lambda _: cap.gate(self.leader), self.form)
        lines = copy_forms.with_stop(code, cap.stop).splitlines()
        marked = [
            f"{line}  # balance delta 2{': leader at cap => global freeze' if n == 0 else ''}"
            for n, line in enumerate(lines)
        ]
        return list(cst.parse_module("\n".join(marked) + "\n").body)

    def apply(self, method: cst.FunctionDef, ctx: DeltaContext) -> tuple[cst.FunctionDef, Outcome]:
        hit, cap = self.find(method, ctx)
        body = list(hit.block.body)
        body[hit.index + 1 : hit.index + 1] = self.gate_statements(cap)
        details = [f"upstream's cap check: `{cap.check}`"]
        if cap.flag is not None:
            details.append(
                f"upstream's check sets `{cap.flag}` (nothing enters RUNNING): the leader's sets it on every rank"
            )
        outcome = self._outcome(*details, f"gathered count (balance_running_count): `{cap.count}`", cap=cap)
        return replace(method, hit.path, hit.block, with_block_body(hit.block, body)), outcome

    def find(self, method: cst.FunctionDef, ctx: DeltaContext) -> tuple[Hit, CapCheck]:
        """Upstream's running-cap check, exactly once (``seam`` rewrites the same statement)."""
        hits = [
            (hit, cap)
            for owner, block, path in blocks(method)
            if isinstance(owner, _LOOPS)
            for index, stmt in enumerate(block.body)
            for cap in self._cap_checks(ctx, block, index)
            for hit in [Hit(owner, block, index, (*path, block))]
        ]
        if len(hits) != 1:
            raise self._fail(ctx, len(hits), [h.stmt for h, _ in hits])
        return hits[0]

    def _cap_checks(self, ctx: DeltaContext, block: cst.IndentedBlock, index: int) -> list[CapCheck]:
        """The cap checks statement ``index`` holds: a break's test, or a stop flag's disjuncts."""
        stmt = block.body[index]
        if breaks(stmt):
            assert isinstance(stmt, cst.If)
            stop, tests = "break", [stmt.test]
        elif (flag := stop_flag(stmt, self.STOP_FLAGS)) is not None:
            target = flag.targets[0].target
            assert isinstance(target, cst.Name)
            stop, tests = f"{target.value} = True", disjuncts(flag.value)
        else:
            return []
        return [cap for test in tests if (cap := self._cap_check(ctx, block, index, test, stop)) is not None]

    def _cap_check(
        self, ctx: DeltaContext, block: cst.IndentedBlock, index: int, node: cst.BaseExpression, stop: str
    ) -> CapCheck | None:
        test = _expr(ctx, node)
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(node, cst.Comparison)):
            return None
        operator = self.OPERATORS.get(type(test.ops[0]))
        (limit,) = test.comparators
        cap = limit.attr if isinstance(limit, ast.Attribute) and shape_of(limit) == _self_attr(limit.attr) else None
        if operator is None or cap not in self.CAPS:
            return None
        count = _count_of(ctx, block, index, node, test.left)
        if count is None or shape_of(ast.parse(f"({count})", mode="eval").body) not in shapes(self.COUNTS):
            return None
        return CapCheck(
            count=count,
            operator=operator,
            cap=cap,
            check=one_line(ctx.code(node)),
            assigned=isinstance(test.left, ast.Name),
            stop=stop,
        )


def stop_flag(stmt: cst.BaseStatement, flags: Sequence[str]) -> cst.Assign | None:
    """``<flag> = <value>`` alone on its line, ``<flag>`` one of ``flags``: the statement, else None."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
        return None
    assign = stmt.body[0]
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1):
        return None
    target = assign.targets[0].target
    return assign if isinstance(target, cst.Name) and target.value in flags else None


def disjuncts(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The parts of an ``a or b or ...`` chain (parentheses are libcst's attributes, not nodes), else ``[node]``."""
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.Or):
        return [*disjuncts(node.left), *disjuncts(node.right)]
    return [node]


def _count_of(
    ctx: DeltaContext, block: cst.IndentedBlock, index: int, comparison: cst.BaseExpression, left: ast.expr
) -> str | None:
    """Upstream's count: the compared expression, or the value of ``name = ...`` right before the check."""
    if not isinstance(left, ast.Name):
        assert isinstance(comparison, cst.Comparison)
        return ctx.code(comparison.left).strip()
    previous = block.body[index - 1] if index > 0 else None
    if not (isinstance(previous, cst.SimpleStatementLine) and len(previous.body) == 1):
        return None
    assign = previous.body[0]
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1):
        return None
    target = assign.targets[0].target
    if not (isinstance(target, cst.Name) and target.value == left.id):
        return None
    return ctx.code(assign.value).strip()


def shape_of(node: ast.AST) -> str:
    return ast.dump(node, include_attributes=False)


def _self_attr(name: str) -> str:
    return shape_of(ast.parse(f"self.{name}", mode="eval").body)


@cache
def shapes(counts: tuple[str, ...]) -> frozenset[str]:
    return frozenset(shape_of(ast.parse(c, mode="eval").body) for c in counts)


class QueueNoneBreaks(Delta):
    number = 3
    title = "no waiting queue breaks instead of asserting"
    looked_for = (
        "`assert request_queue is not None` directly inside a loop, or instead upstream's own "
        "`if not request_queue ...: break`, or (no request_queue at all) one "
        "`request = self.waiting.peek_request()` in a `while self.waiting ...` loop"
    )
    ANCHORS = ("assert request_queue is not None",)
    # Where upstream itself breaks on an empty queue (0.31+), there is no assert to replace: the
    # delta is not needed. The stop is `if <test>: break` in a loop, <test> one of these or an
    # `or` with one of them.
    EMPTY_QUEUE_TESTS = ("not request_queue",)
    # Before 0.18 the WAITING loop has no queue variable at all: it peeks ``self.waiting`` itself,
    # and the loop's own test (``self.waiting``, or an ``and`` with it) stops on an empty queue.
    # Nothing can be None, so the delta is not needed. Both parts are required, as data.
    DIRECT_PEEKS = ("request = self.waiting.peek_request()",)
    NONEMPTY_LOOP_TESTS = ("self.waiting",)
    QUEUE_NAME = "request_queue"

    def apply(self, method: cst.FunctionDef, ctx: DeltaContext) -> tuple[cst.FunctionDef, Outcome]:
        hits = find(method, ctx.module, cst.SimpleStatementLine, self.ANCHORS)
        if not hits:
            if not _names(method, self.QUEUE_NAME):
                return method, self._no_queue(method, ctx)
            return method, self._not_needed(method, ctx)
        if len(hits) != 1 or not isinstance(hits[0].owner, _LOOPS):  # `break` needs a loop
            raise self._fail(ctx, len(hits) if len(hits) != 1 else 0, [h.stmt for h in hits])
        (hit,) = hits
        old = hit.stmt
        assert isinstance(old, cst.SimpleStatementLine)
        new = cst.parse_statement(
            "if request_queue is None:  # balance delta 3: break where upstream asserts\n    break  # balance delta 3\n"
        ).with_changes(leading_lines=old.leading_lines)
        return replace(method, hit.path, old, new), self._outcome(
            "replaces upstream's `assert request_queue is not None`"
        )

    def _not_needed(self, method: cst.FunctionDef, ctx: DeltaContext) -> Outcome:
        stops = [
            stmt
            for owner, block, _ in blocks(method)
            if isinstance(owner, _LOOPS)
            for stmt in block.body
            if breaks(stmt) and self._tests_empty_queue(ctx, stmt)
        ]
        if len(stops) != 1:
            raise self._fail(ctx, len(stops), stops)
        (stop,) = stops
        assert isinstance(stop, cst.If)
        return self._outcome(
            "upstream breaks on an empty queue itself, so there is no assert to replace",
            f"({ctx.line_label(stop)}`if {one_line(ctx.code(stop.test))}: break`)",
            applied=False,
        )

    def _no_queue(self, method: cst.FunctionDef, ctx: DeltaContext) -> Outcome:
        """No ``request_queue`` anywhere: the one direct peek must sit in a loop whose test needs ``self.waiting``."""
        peeks = [
            (owner, stmt)
            for owner, block, _ in blocks(method)
            if isinstance(owner, cst.While) and _guards_nonempty(ctx, owner, self.NONEMPTY_LOOP_TESTS)
            for stmt in block.body
            if isinstance(stmt, cst.SimpleStatementLine) and same_code(ctx.module, stmt, self.DIRECT_PEEKS)
        ]
        if len(peeks) != 1:
            raise self._fail(ctx, len(peeks), [stmt for _, stmt in peeks])
        ((loop, peek),) = peeks
        assert isinstance(loop, cst.While)
        return self._outcome(
            "no request_queue in the WAITING loop: it peeks self.waiting, and the loop test stops on an empty queue",
            f"(`while {ctx.code(loop.test).strip()}:`, {ctx.line_label(peek)}`{ctx.code(peek).strip()}`)",
            applied=False,
        )

    def _tests_empty_queue(self, ctx: DeltaContext, stmt: cst.BaseStatement) -> bool:
        assert isinstance(stmt, cst.If)
        return _has_part(ctx, stmt.test, ast.Or, self.EMPTY_QUEUE_TESTS)


def _names(node: cst.CSTNode, name: str) -> bool:
    """Whether ``name`` is read or bound anywhere under ``node`` (a whole-tree walk: only on the rare path)."""
    if isinstance(node, cst.Name) and node.value == name:
        return True
    return any(_names(child, name) for child in node.children)


def _guards_nonempty(ctx: DeltaContext, loop: cst.While, tests: tuple[str, ...]) -> bool:
    """The loop's test is one of ``tests``, or an ``and`` with one of them: the loop ends on an empty queue."""
    return _has_part(ctx, loop.test, ast.And, tests)


def _has_part(ctx: DeltaContext, node: cst.BaseExpression, joined_by: type[ast.boolop], tests: tuple[str, ...]) -> bool:
    """``node`` is one of ``tests`` (as ast shape), or a ``joined_by`` chain (``or``/``and``) holding one."""
    test = _expr(ctx, node)
    if test is None:
        return False
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, joined_by) else [test]
    wanted = shapes(tests)
    return any(shape_of(part) in wanted for part in parts)


_READS_WAITING = re.compile(r"\bself\.\w*waiting\b")


def _waiting_loops(method: cst.FunctionDef) -> Sequence[cst.CSTNode]:
    """Where the WAITING admission loop probably is, to show the maintainer on failure.

    The innermost loops whose code reads a waiting queue: ``self.waiting`` (its test did up to 0.30, its
    body since), or from 0.34 one of the queues it takes from (``self.kv_holding_waiting``...).
    """
    loops = {id(o): o for o, _, _ in blocks(method) if isinstance(o, _LOOPS)}
    module = cst.Module(body=[])
    waiting = [loop for loop in loops.values() if _READS_WAITING.search(module.code_for_node(loop))]
    inner = [loop for loop in waiting if not any(other is not loop and _contains(loop, other) for other in waiting)]
    return inner


def _contains(outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
    return any(child is inner or _contains(child, inner) for child in outer.children)


DELTAS: tuple[Delta, ...] = (DisabledPathDelegates(), LeaderAtCapFreezes(), QueueNoneBreaks())


@dataclass(frozen=True)
class Patched:
    method: cst.FunctionDef
    outcomes: tuple[Outcome, ...]

    @property
    def cap(self) -> CapCheck:
        (cap,) = [o.cap for o in self.outcomes if o.cap is not None]
        return cap


def apply_all(method: cst.FunctionDef, ctx: DeltaContext, deltas: Sequence[Delta] = DELTAS) -> Patched:
    if not isinstance(method.body, cst.IndentedBlock):
        raise UpstreamShapeError(f"{CLASS_NAME}.{METHOD_NAME} at {ctx.tag} is a one-line def: nothing to patch")
    ctx.method = method
    outcomes = []
    for delta in deltas:
        method, outcome = delta.apply(method, ctx)
        outcomes.append(outcome)
    return Patched(method, tuple(outcomes))

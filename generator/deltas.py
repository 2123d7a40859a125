"""The three balance deltas, each a small libcst transform with a structural anchor.

An anchor must match exactly once. Zero or several matches raise ``DeltaDoesNotApply`` naming the
delta, the tag, what was looked for, and the upstream lines where it was expected: the generator
never guesses. Retiring or re-anchoring a delta for newer tags is a change to this file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

from generator.errors import DeltaDoesNotApply, UpstreamShapeError
from generator.extract import CLASS_NAME, METHOD_NAME


@dataclass
class DeltaContext:
    """What a delta needs besides the method: the tag and upstream, to report where it looked."""

    tag: str
    module: cst.Module
    _positions: dict[cst.CSTNode, object] | None = None

    def lines_of(self, node: cst.CSTNode) -> tuple[int, int] | None:
        # Positions are resolved only on failure: the happy path never pays for the metadata pass.
        if self._positions is None:
            wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
            self._positions = dict(wrapper.resolve(PositionProvider))
        pos = self._positions.get(node)
        return None if pos is None else (pos.start.line, pos.end.line)  # type: ignore[attr-defined]

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


def _self_attr(name: str) -> m.Attribute:
    return m.Attribute(value=m.Name("self"), attr=m.Name(name))


def _statement(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


def _loops_containing(method: cst.FunctionDef, stmt_matcher: m.BaseMatcherNode) -> list[tuple[cst.CSTNode, int]]:
    """(loop, index) for each statement matching ``stmt_matcher`` directly in a while/for body."""
    found = []
    for loop in m.findall(method, m.While() | m.For()):
        assert isinstance(loop, (cst.While, cst.For))
        for index, stmt in enumerate(loop.body.body):
            if m.matches(stmt, stmt_matcher):
                found.append((loop, index))
    return found


class Delta:
    number: ClassVar[int]
    title: ClassVar[str]
    # Human description of the anchor, used in the failure line.
    looked_for: ClassVar[str]

    def apply(self, method: cst.FunctionDef, ctx: DeltaContext) -> cst.FunctionDef:
        raise NotImplementedError

    def _fail(self, ctx: DeltaContext, found: int, near: Sequence[cst.CSTNode]) -> DeltaDoesNotApply:
        what = "not found" if found == 0 else f"found {found} times (ambiguous)"
        return DeltaDoesNotApply(
            f"delta {self.number} ({self.title}) does not apply to {ctx.tag}: {self.looked_for} "
            f"in {CLASS_NAME}.{METHOD_NAME}() {what}; re-anchor it in generator/deltas.py "
            "or keep the current pin",
            detail=ctx.excerpt(near),
        )


class DisabledPathDelegates(Delta):
    number = 1
    title = "disabled path returns upstream schedule()"
    looked_for = "a method whose first parameter is self"

    def apply(self, method: cst.FunctionDef, ctx: DeltaContext) -> cst.FunctionDef:
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
        gate = _statement(
            "if not self._balance_enabled:  # balance delta 1: balance off -> upstream verbatim\n"
            f"    return super().{METHOD_NAME}({', '.join(args)})  # balance delta 1\n"
        )
        body = list(method.body.body)
        # A docstring must stay the first statement to remain the docstring.
        at = 1 if body and m.matches(body[0], m.SimpleStatementLine(body=[m.Expr(m.SimpleString())])) else 0
        body.insert(at, gate)
        return method.with_changes(body=method.body.with_changes(body=body))


class LeaderAtCapFreezes(Delta):
    number = 2
    title = "leader at cap freezes admission on every rank"
    looked_for = "the WAITING loop's running-cap break `if len(self.running) == self.max_num_running_reqs: break`"
    _CAP_BREAK = m.If(
        test=m.Comparison(
            left=m.Call(func=m.Name("len"), args=[m.Arg(value=_self_attr("running"))]),
            comparisons=[
                m.ComparisonTarget(
                    operator=m.Equal() | m.GreaterThanEqual(),
                    comparator=_self_attr("max_num_running_reqs"),
                )
            ],
        ),
        body=m.IndentedBlock(body=[m.SimpleStatementLine(body=[m.Break()])]),
        orelse=None,
    )

    def apply(self, method: cst.FunctionDef, ctx: DeltaContext) -> cst.FunctionDef:
        hits = _loops_containing(method, self._CAP_BREAK)
        if len(hits) != 1:
            near = [loop.body.body[i] for loop, i in hits] or _waiting_loops(method, ctx) or [method]
            raise self._fail(ctx, len(hits), near)
        loop, index = hits[0]
        gate = _statement(
            "if max(t.item() for t in self.balance_queue) == self.max_num_running_reqs:"
            "  # balance delta 2: leader at cap => global freeze\n"
            "    break  # balance delta 2\n"
        )
        body = list(loop.body.body)
        body.insert(index + 1, gate)
        return method.deep_replace(loop, loop.with_changes(body=loop.body.with_changes(body=body)))


class QueueNoneBreaks(Delta):
    number = 3
    title = "no waiting queue breaks instead of asserting"
    looked_for = "`assert request_queue is not None` directly inside a loop"
    _ASSERT = m.SimpleStatementLine(
        body=[
            m.Assert(
                test=m.Comparison(
                    left=m.Name("request_queue"),
                    comparisons=[m.ComparisonTarget(operator=m.IsNot(), comparator=m.Name("None"))],
                ),
                msg=None,
            )
        ]
    )

    def apply(self, method: cst.FunctionDef, ctx: DeltaContext) -> cst.FunctionDef:
        anywhere = m.findall(method, self._ASSERT)
        in_loop = _loops_containing(method, self._ASSERT)
        if len(anywhere) != 1 or len(in_loop) != 1:
            count = len(anywhere) if len(anywhere) != 1 else 0
            raise self._fail(ctx, count, list(anywhere) or _waiting_loops(method, ctx) or [method])
        old = anywhere[0]
        assert isinstance(old, cst.SimpleStatementLine)
        new = _statement(
            "if request_queue is None:  # balance delta 3: break where upstream asserts\n    break  # balance delta 3\n"
        ).with_changes(leading_lines=old.leading_lines)
        return method.deep_replace(old, new)


def _waiting_loops(method: cst.FunctionDef, ctx: DeltaContext) -> list[cst.CSTNode]:
    """Where the WAITING admission loop probably is, to show the maintainer on failure."""
    return [
        loop
        for loop in m.findall(method, m.While())
        if "self.waiting" in ctx.module.code_for_node(loop.test)  # type: ignore[attr-defined]
    ]


DELTAS: tuple[Delta, ...] = (DisabledPathDelegates(), LeaderAtCapFreezes(), QueueNoneBreaks())


def apply_all(method: cst.FunctionDef, ctx: DeltaContext) -> cst.FunctionDef:
    if not isinstance(method.body, cst.IndentedBlock):
        raise UpstreamShapeError(f"{CLASS_NAME}.{METHOD_NAME} at {ctx.tag} is a one-line def: nothing to patch")
    for delta in DELTAS:
        method = delta.apply(method, ctx)
    return method

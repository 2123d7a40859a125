"""The three balance deltas, each a small libcst transform with a structural anchor.

An anchor is declared as the upstream code it must find, compared structurally (as a stdlib
``ast`` dump: formatting and comments do not matter, anything else does). It must match exactly
once. Zero or several matches raise ``DeltaDoesNotApply`` naming the delta, the tag, what was
looked for, and the upstream lines where it was expected: the generator never guesses. Retiring
or re-anchoring a delta for newer tags is a change to this file (and to its twin in verify.py).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import ClassVar

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from generator.errors import DeltaDoesNotApply, UpstreamShapeError
from generator.extract import CLASS_NAME, METHOD_NAME

Path = tuple[cst.CSTNode, ...]
_LOOPS = (cst.While, cst.For)


@dataclass
class DeltaContext:
    """What a delta needs besides the method: the tag and upstream, to report where it looked."""

    tag: str
    module: cst.Module
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


@cache
def _shape(code: str) -> str:
    return ast.dump(ast.parse(code))


def _same_code(ctx: DeltaContext, stmt: cst.CSTNode, anchors: tuple[str, ...]) -> bool:
    try:
        return _shape(ctx.code(stmt).strip("\n")) in {_shape(a) for a in anchors}
    except SyntaxError:  # a statement whose text alone does not parse (e.g. `break`) is no anchor
        return False


def _blocks(node: cst.CSTNode, path: Path = ()) -> Iterator[tuple[cst.CSTNode, cst.IndentedBlock, Path]]:
    """(owner, block, ancestors) for every indented block under ``node``, statements only.

    Anchors are statements, so expressions (most of the tree) are never visited: this is what
    keeps the deltas cheap next to parsing upstream.
    """
    path = (*path, node)
    for child in node.children:
        if isinstance(child, cst.IndentedBlock):
            yield node, child, path
            for stmt in child.body:
                if isinstance(stmt, cst.BaseCompoundStatement):
                    yield from _blocks(stmt, (*path, child))
        elif isinstance(child, (cst.BaseCompoundStatement, cst.Else, cst.ExceptHandler, cst.Finally, cst.MatchCase)):
            yield from _blocks(child, path)


@dataclass(frozen=True)
class _Hit:
    owner: cst.CSTNode  # the compound statement whose block holds the match
    block: cst.IndentedBlock
    index: int
    path: Path  # ancestors from the method down to the block

    @property
    def stmt(self) -> cst.BaseStatement:
        return self.block.body[self.index]


def _find(
    method: cst.FunctionDef, ctx: DeltaContext, kind: type[cst.BaseStatement], anchors: tuple[str, ...]
) -> list[_Hit]:
    return [
        _Hit(owner, block, index, (*path, block))
        for owner, block, path in _blocks(method)
        for index, stmt in enumerate(block.body)
        if isinstance(stmt, kind) and _small(stmt) and _same_code(ctx, stmt, anchors)
    ]


def _small(stmt: cst.BaseStatement) -> bool:
    """Anchors are one-statement ifs or simple lines: skip rendering large compound statements."""
    if isinstance(stmt, cst.If):
        return stmt.orelse is None and isinstance(stmt.body, cst.IndentedBlock) and len(stmt.body.body) == 1
    return isinstance(stmt, cst.SimpleStatementLine)


class _ReplaceAlongPath(cst.CSTTransformer):
    """Replace one node, descending only through its ancestors (not the whole method)."""

    def __init__(self, path: Path, old: cst.CSTNode, new: cst.CSTNode) -> None:
        super().__init__()
        self._on_path = {id(node) for node in path}
        self._old, self._new = old, new

    def on_visit(self, node: cst.CSTNode) -> bool:
        return id(node) in self._on_path

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        return self._new if original_node is self._old else updated_node


def _replace(method: cst.FunctionDef, path: Path, old: cst.CSTNode, new: cst.CSTNode) -> cst.FunctionDef:
    result = method.visit(_ReplaceAlongPath(path, old, new))
    assert isinstance(result, cst.FunctionDef)
    return result


def _with_block_body(block: cst.IndentedBlock, body: list[cst.BaseStatement]) -> cst.IndentedBlock:
    return block.with_changes(body=body)


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
        gate = cst.parse_statement(
            "if not self._balance_enabled:  # balance delta 1: balance off -> upstream verbatim\n"
            f"    return super().{METHOD_NAME}({', '.join(args)})  # balance delta 1\n"
        )
        assert isinstance(method.body, cst.IndentedBlock)
        body = list(method.body.body)
        # A docstring must stay the first statement to remain the docstring.
        at = 1 if body and _is_docstring(body[0]) else 0
        body.insert(at, gate)
        return method.with_changes(body=_with_block_body(method.body, body))


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


class LeaderAtCapFreezes(Delta):
    number = 2
    title = "leader at cap freezes admission on every rank"
    looked_for = "the WAITING loop's running-cap break `if len(self.running) == self.max_num_running_reqs: break`"
    ANCHORS = (
        "if len(self.running) == self.max_num_running_reqs:\n    break",
        "if len(self.running) >= self.max_num_running_reqs:\n    break",
    )

    def apply(self, method: cst.FunctionDef, ctx: DeltaContext) -> cst.FunctionDef:
        hits = [h for h in _find(method, ctx, cst.If, self.ANCHORS) if isinstance(h.owner, _LOOPS)]
        if len(hits) != 1:
            raise self._fail(ctx, len(hits), [h.stmt for h in hits] or _waiting_loops(method, ctx) or [method])
        (hit,) = hits
        gate = cst.parse_statement(
            "if max(t.item() for t in self.balance_queue) == self.max_num_running_reqs:"
            "  # balance delta 2: leader at cap => global freeze\n"
            "    break  # balance delta 2\n"
        )
        body = list(hit.block.body)
        body.insert(hit.index + 1, gate)
        return _replace(method, hit.path, hit.block, _with_block_body(hit.block, body))


class QueueNoneBreaks(Delta):
    number = 3
    title = "no waiting queue breaks instead of asserting"
    looked_for = "`assert request_queue is not None` directly inside a loop"
    ANCHORS = ("assert request_queue is not None",)

    def apply(self, method: cst.FunctionDef, ctx: DeltaContext) -> cst.FunctionDef:
        hits = _find(method, ctx, cst.SimpleStatementLine, self.ANCHORS)
        if len(hits) != 1 or not isinstance(hits[0].owner, _LOOPS):  # `break` needs a loop
            count = len(hits) if len(hits) != 1 else 0
            raise self._fail(ctx, count, [h.stmt for h in hits] or _waiting_loops(method, ctx) or [method])
        (hit,) = hits
        old = hit.stmt
        assert isinstance(old, cst.SimpleStatementLine)
        new = cst.parse_statement(
            "if request_queue is None:  # balance delta 3: break where upstream asserts\n    break  # balance delta 3\n"
        ).with_changes(leading_lines=old.leading_lines)
        return _replace(method, hit.path, old, new)


def _waiting_loops(method: cst.FunctionDef, ctx: DeltaContext) -> list[cst.CSTNode]:
    """Where the WAITING admission loop probably is, to show the maintainer on failure."""
    loops = {id(o): o for o, _, _ in _blocks(method) if isinstance(o, cst.While)}
    return [loop for loop in loops.values() if "self.waiting" in ctx.code(loop.test)]


DELTAS: tuple[Delta, ...] = (DisabledPathDelegates(), LeaderAtCapFreezes(), QueueNoneBreaks())


def apply_all(method: cst.FunctionDef, ctx: DeltaContext) -> cst.FunctionDef:
    if not isinstance(method.body, cst.IndentedBlock):
        raise UpstreamShapeError(f"{CLASS_NAME}.{METHOD_NAME} at {ctx.tag} is a one-line def: nothing to patch")
    for delta in DELTAS:
        method = delta.apply(method, ctx)
    return method

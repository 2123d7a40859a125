"""Where an edit goes in upstream's method: statements found by their code, and replaced along their path.

Anchors are statements, compared structurally (as a stdlib ``ast`` dump: formatting and comments do
not matter, anything else does). Only statements are visited, never expressions (most of the tree):
this is what keeps finding anchors cheap next to parsing upstream. ``deltas`` and ``edits`` use it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import libcst as cst

Path = tuple[cst.CSTNode, ...]


@cache
def _shape(code: str) -> str:
    return ast.dump(ast.parse(code))


@cache
def _heads(anchors: tuple[str, ...]) -> frozenset[str]:
    """The statement kind each anchor is (``Assert``, ``If``...): libcst and ast share these names."""
    return frozenset(type(ast.parse(a).body[0]).__name__ for a in anchors)


def _head(stmt: cst.CSTNode) -> str:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return type(stmt.body[0]).__name__
    return type(stmt).__name__


def same_code(module: cst.Module, stmt: cst.CSTNode, anchors: tuple[str, ...]) -> bool:
    # Rendering a statement costs far more than naming its kind: most statements stop here.
    if _head(stmt) not in _heads(anchors):
        return False
    try:
        return _shape(module.code_for_node(stmt).strip("\n")) in {_shape(a) for a in anchors}
    except SyntaxError:  # a statement whose text alone does not parse (e.g. `break`) is no anchor
        return False


def blocks(node: cst.CSTNode, path: Path = ()) -> Iterator[tuple[cst.CSTNode, cst.IndentedBlock, Path]]:
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
                    yield from blocks(stmt, (*path, child))
        elif isinstance(child, (cst.BaseCompoundStatement, cst.Else, cst.ExceptHandler, cst.Finally, cst.MatchCase)):
            yield from blocks(child, path)


@dataclass(frozen=True)
class Hit:
    owner: cst.CSTNode  # the compound statement whose block holds the match
    block: cst.IndentedBlock
    index: int
    path: Path  # ancestors from the method down to the block

    @property
    def stmt(self) -> cst.BaseStatement:
        return self.block.body[self.index]


def find(
    method: cst.FunctionDef, module: cst.Module, kind: type[cst.BaseStatement], anchors: tuple[str, ...]
) -> list[Hit]:
    """Every statement of ``kind`` in ``method`` (a one-statement ``if`` or a simple line) among ``anchors``."""
    return [
        Hit(owner, block, index, (*path, block))
        for owner, block, path in blocks(method)
        for index, stmt in enumerate(block.body)
        if isinstance(stmt, kind) and small(stmt) and same_code(module, stmt, anchors)
    ]


def small(stmt: cst.BaseStatement) -> bool:
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


def replace(method: cst.FunctionDef, path: Path, old: cst.CSTNode, new: cst.CSTNode) -> cst.FunctionDef:
    result = method.visit(_ReplaceAlongPath(path, old, new))
    assert isinstance(result, cst.FunctionDef)
    return result


def with_block_body(block: cst.IndentedBlock, body: list[cst.BaseStatement]) -> cst.IndentedBlock:
    return block.with_changes(body=body)

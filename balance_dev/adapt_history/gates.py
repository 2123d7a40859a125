"""The tree's version gates that release B makes dead, folded as plain ``adapt`` retires them (from B on).

Read here with stdlib ``ast`` alone, nothing of ``generator``: a call of the tree's gate helper naming a
release older than B can no longer be true, so ``if``, ``not``, ``and``/``or`` and ``a if gate else b`` fold
around it. A copy ``adapt`` kept in conflict, or re-synced, may so lose the dead branches it carried; the
history compares it with the copy so folded, not with one still holding code no release it runs on takes.
"""

from __future__ import annotations

import ast
import copy

from packaging.version import InvalidVersion, Version

# vllm-ascend's helper (true when the installed vLLM is exactly the release named): the only gate idiom
# among the plugins the history measures (docs/adapt.md, "Which plugins gate, and how").
HELPERS = frozenset({"vllm_version_is"})


def _dead(node: ast.Call, b: Version) -> bool:
    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
    if name not in HELPERS or len(node.args) != 1 or not isinstance(node.args[0], ast.Constant):
        return False
    try:
        return Version(str(node.args[0].value)) < b
    except InvalidVersion:
        return False


class ConstantFolding(ast.NodeTransformer):
    """``not``, ``and``/``or``, ``a if c else b`` and ``if`` folded where a subclass's ``visit_Call`` made a gate
    a constant: the reading of a gated file as one release runs it (the span tests fold with it too)."""

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and isinstance(node.operand, ast.Constant):
            return ast.Constant(not node.operand.value)
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        stop = isinstance(node.op, ast.Or)
        values = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, bool):
                if value.value is stop:
                    return ast.Constant(stop)
                continue
            values.append(value)
        if not values:
            return ast.Constant(not stop)
        return values[0] if len(values) == 1 else ast.BoolOp(node.op, values)

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.test, ast.Constant) and isinstance(node.test.value, bool):
            return node.body if node.test.value else node.orelse
        return node

    def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        if isinstance(node.test, ast.Constant) and isinstance(node.test.value, bool):
            return (node.body if node.test.value else node.orelse) or []
        return node


class _Fold(ConstantFolding):
    def __init__(self, b: Version) -> None:
        self.b = b

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        return ast.Constant(False) if _dead(node, self.b) else node


def folded(func: ast.AST, b: str) -> ast.AST:
    """``func`` with the gates dead at ``b`` (``v0.29.0``) folded; ``func`` itself when it holds none."""
    try:
        at = Version(b.removeprefix("v"))
    except InvalidVersion:
        return func
    if not any(isinstance(n, ast.Call) and _dead(n, at) for n in ast.walk(func)):
        return func
    return ast.fix_missing_locations(_Fold(at).visit(copy.deepcopy(func)))

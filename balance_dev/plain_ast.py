"""A definition found and compared with stdlib ``ast`` alone: the tests' own truth for couplings and impact.

Written apart from ``generator.judge.couplings`` on purpose: the impact tests judge its statuses
against these, so the two must not share code.
"""

from __future__ import annotations

import ast


def find(tree: ast.Module, qualname: str) -> ast.AST | None:
    """The module-level definition ``qualname`` (``Class.method``, ``name``; "" the module), the last one kept."""
    node: ast.AST = tree
    for part in qualname.split(".") if qualname else []:
        found = [
            n
            for n in getattr(node, "body", [])
            if (isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == part)
            or (isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == part for t in n.targets))
            or (isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == part)
        ]
        if not found:
            return None
        node = found[-1]
    return node


def plain(node: ast.AST) -> str:
    """The node as ``ast`` sees it, its docstrings dropped (formatting and comments are gone already)."""
    node = ast.parse(ast.unparse(node))
    for inner in ast.walk(node):
        body = getattr(inner, "body", None)
        if not isinstance(body, list) or not body:
            continue
        first = body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            inner.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return ast.dump(node)

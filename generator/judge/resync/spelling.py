"""Annotations read for what they mean: ``Optional[X]`` is ``X | None``, ``List[X]`` is ``list[X]``.

vLLM rewrote its annotations to PEP 604 and PEP 585 spellings (``X | None``, ``list[X]``); a plugin's
copy taken before keeps ``Optional``, ``Union`` and ``List``. Compared as written, every signature of
such a copy is "changed by the copy", so every upstream change to a signature (a new parameter, a
renamed type) met it and the whole copy was a conflict; and where upstream's only change was the
respelling, a copy looked stale when nothing it does had changed. The two spellings mean the same to
every type checker (and ``Optional[int] == int | None`` to Python), so the merge and its check compare
statements with annotations read this way. Only annotations (a parameter's, a return's, an
annotated assignment's): ``cast(Optional[int], x)`` is code and stays as written. The texts are
never rewritten: where a statement is the copy's it keeps the copy's spelling.
"""

from __future__ import annotations

import ast

# typing's aliases of the builtin generics (PEP 585).
_BUILTIN = {"List": "list", "Dict": "dict", "Tuple": "tuple", "Set": "set", "FrozenSet": "frozenset", "Type": "type"}


def plain(func: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    """Rewrite, in place, every annotation in ``func`` (nested functions too) to the PEP 604/585 spelling."""
    for node in ast.walk(func):
        if isinstance(node, ast.arg) and node.annotation is not None:
            node.annotation = _plain(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            node.returns = _plain(node.returns)
        elif isinstance(node, ast.AnnAssign):
            node.annotation = _plain(node.annotation)


def _typing_name(node: ast.expr) -> str | None:
    """``Optional`` for ``Optional`` and ``typing.Optional``; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "typing":
        return node.attr
    return None


def _plain(node: ast.expr) -> ast.expr:
    respelled: ast.expr = _Respell().visit(node)
    return respelled


class _Respell(ast.NodeTransformer):
    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        self.generic_visit(node)
        name = _typing_name(node.value)
        if name == "Optional":
            return _or([node.slice, ast.Constant(value=None)], node)
        if name == "Union":
            members = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
            return _or(members, node) if members else node  # ``Union[()]`` means nothing to respell
        if name in _BUILTIN:
            node.value = ast.copy_location(ast.Name(id=_BUILTIN[name], ctx=ast.Load()), node.value)
        return node


def _or(parts: list[ast.expr], where: ast.AST) -> ast.expr:
    """``a | b | c`` as the parser builds it (left-associative), placed where the subscript was."""
    out = _placed(parts[0], where)
    for part in parts[1:]:
        out = ast.copy_location(ast.BinOp(left=out, op=ast.BitOr(), right=_placed(part, where)), where)
    return out


def _placed(node: ast.expr, where: ast.AST) -> ast.expr:
    """A new node at the subscript's place (the merge finds a header's end by its nodes' lines); a node
    from the source keeps its own."""
    return node if hasattr(node, "lineno") else ast.copy_location(node, where)

"""A docstring both sides changed is the copy's: A's and B's texts are given it before the merge.

A docstring is what the copy says of itself, never code. When the copy rewrote (or dropped) its function's
docstring and B reworded it too, the two changes would meet on that one statement and make the whole copy
a conflict; the copy's words stay and B's rewording is not taken. A's and B's texts get the copy's docstring
(so it is no side's change) before the merge and the check alike, so the check holds the merge to every
other change of B's. Only where the texts allow it line for line: each docstring on lines of its own, the
copy's body indented as A's and B's.
"""

from __future__ import annotations

import ast

from generator.judge.resync.merge import Unmergeable, parse_function


def _function(text: str) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None:
    """The one function ``text`` holds and the line offset of its parse (1 when it was indented)."""
    try:
        side = parse_function(text)
    except Unmergeable:
        return None
    return side.func, side.offset


def _docstring(func: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.Expr | None:
    head = func.body[0]
    if isinstance(head, ast.Expr) and isinstance(head.value, ast.Constant) and isinstance(head.value.value, str):
        return head
    return None


def _value(node: ast.Expr | None) -> str | None:
    return None if node is None else str(node.value.value)  # type: ignore[attr-defined]


def _on_own_lines(lines: list[str], node: ast.stmt, offset: int) -> bool:
    first, last = node.lineno - offset, (node.end_lineno or node.lineno) - offset
    before = lines[first - 1][: node.col_offset]
    after = lines[last - 1][node.end_col_offset or 0 :]
    return not before.strip() and (not after.strip() or after.strip().startswith("#"))


def carried(base: str, ours: str, theirs: str) -> tuple[str, str]:
    """``base`` and ``theirs`` with the copy's docstring where both sides changed the function's docstring,
    so that it is no change of either side's; else the two as they are."""
    found = [_function(text) for text in (base, ours, theirs)]
    if any(f is None for f in found):
        return base, theirs
    (fa, oa), (fo, oo), (ft, ot) = found  # type: ignore[misc]
    da, do, dt = _docstring(fa), _docstring(fo), _docstring(ft)
    va, vo, vt = _value(da), _value(do), _value(dt)
    if va in (vo, vt) or vo == vt:
        return base, theirs  # one side kept it, or both made the same change: the merge's ordinary rule
    our_lines = ours.splitlines(keepends=True)
    if do is not None and not _on_own_lines(our_lines, do, oo):
        return base, theirs
    words = [] if do is None else our_lines[do.lineno - oo - 1 : (do.end_lineno or do.lineno) - oo]
    new_base = _given(base, fa, oa, da, words, fo.body[0].col_offset)
    new_theirs = _given(theirs, ft, ot, dt, words, fo.body[0].col_offset)
    if new_base is None or new_theirs is None:
        return base, theirs
    return new_base, new_theirs


def _given(
    text: str,
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    offset: int,
    doc: ast.Expr | None,
    words: list[str],
    col: int,
) -> str | None:
    """``text`` with ``words`` (the copy's docstring lines, none to drop it) in place of its docstring; None
    when its lines do not allow it (its body indented unlike the copy's, a docstring sharing a line, no body
    left)."""
    lines = text.splitlines(keepends=True)
    head = func.body[0]
    if head.col_offset != col or (doc is not None and not _on_own_lines(lines, doc, offset)):
        return None
    if doc is not None and len(func.body) == 1 and not words:
        return None
    if doc is not None:
        start, end = doc.lineno - offset - 1, (doc.end_lineno or doc.lineno) - offset
    else:
        first = min([head.lineno, *(d.lineno for d in getattr(head, "decorator_list", []))])
        start = end = first - offset - 1
    return "".join(lines[:start] + words + lines[end:])

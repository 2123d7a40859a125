"""A spec's data edits applied to upstream's function, each at an anchor that must match exactly once.

An anchor is a run of consecutive statements written as code (``astpattern``: capitals stand for
whatever code is there), compared as ``ast`` sees it, so formatting and comments never matter.
What goes before, after or instead of it is the copy's own code, kept as written (its comments
too). Edits apply in the spec's order; each anchor is looked for in upstream's function as the
edits before it left it. Zero or several matches raise ``EditDoesNotApply`` naming the spec, the
edit and upstream's numbered lines where it was expected: nothing is guessed, nothing is written.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from generator import astpattern
from generator.deltas import Hit, _blocks, replace, with_block_body
from generator.errors import EditDoesNotApply, UsageError
from generator.layout import CopySpec, Edit


def check_statements(code: str, where: str) -> None:
    """Refuse, as bad input, code that is not one or more whole statements."""
    try:
        body = ast.parse(_dedent(code)).body
    except SyntaxError as exc:
        raise UsageError(f"{where} does not parse as Python statements (line {exc.lineno}): fix the spec") from None
    if not body:
        raise UsageError(f"{where} holds no statement: write the statements, see docs/copies.md")


def _dedent(code: str) -> str:
    import textwrap

    return textwrap.dedent(code.strip("\n")) + "\n"


def _as_ast(module: cst.Module, stmt: cst.BaseStatement) -> ast.stmt | None:
    try:
        body = ast.parse(module.code_for_node(stmt).strip("\n") + "\n").body
    except SyntaxError:  # `break` or `return` alone parse; nothing a block holds should fail, but never guess
        return None
    return body[0] if len(body) == 1 else None


@dataclass(frozen=True)
class Applied:
    edit: Edit
    first_line: str  # the anchor's first line in upstream, for reports


def _matches(module: cst.Module, method: cst.FunctionDef, edit: Edit) -> list[tuple[Hit, int]]:
    size = len(astpattern.statements(_dedent(edit.anchor)))
    first = type(astpattern.statements(_dedent(edit.anchor))[0])
    found = []
    for owner, block, path in _blocks(method):
        nodes = [_as_ast(module, s) for s in block.body]
        for index, node in enumerate(nodes):
            # Only statements of the anchor's first kind can start a match (cheap next to matching).
            if not isinstance(node, first) or None in nodes[index : index + size]:
                continue
            run = [n for n in nodes[index : index + size] if n is not None]
            if astpattern.match_run(_dedent(edit.anchor), run, 0) is not None:
                found.append((Hit(owner, block, index, (*path, block)), size))
    return found


def _numbered(text: str, center: int, around: int = 5) -> str:
    lines = text.splitlines()
    first, last = max(1, center - around), min(len(lines), center + around)
    return "\n".join(f"{n:>5} | {lines[n - 1]}" for n in range(first, last + 1))


def _where_expected(upstream_text: str, method_text: str, edit: Edit, hits: Sequence[tuple[Hit, int]]) -> str:
    """Upstream's numbered lines at each match, or (none) around the line most like the anchor's first."""
    lines = upstream_text.splitlines()
    start = upstream_text.find(method_text)
    offset = upstream_text.count("\n", 0, start) if start >= 0 else 0
    method_lines = method_text.splitlines()
    wanted = [_dedent(edit.anchor).splitlines()[0].strip()]
    if hits:
        wanted = [cst.Module(body=[]).code_for_node(h.stmt).strip().splitlines()[0] for h, _ in hits]
    chunks = []
    for line in wanted:
        stripped = [m.strip() for m in method_lines]
        close = difflib.get_close_matches(line, stripped, n=1, cutoff=0.0)
        if close and lines:
            chunks.append(_numbered(upstream_text, offset + stripped.index(close[0]) + 1))
    return "\n  ...\n".join(chunks)


def apply(
    module: cst.Module, method: cst.FunctionDef, spec: CopySpec, *, tag: str, upstream_text: str
) -> tuple[cst.FunctionDef, tuple[Applied, ...]]:
    """``method`` with the spec's data edits applied, in order; EditDoesNotApply on a missing or repeated anchor."""
    method_text = module.code_for_node(method)
    applied = []
    for edit in spec.edits:
        hits = _matches(module, method, edit)
        if len(hits) != 1:
            what = "not found" if not hits else f"found {len(hits)} times (ambiguous)"
            first = _dedent(edit.anchor).splitlines()[0].strip()
            raise EditDoesNotApply(
                f"spec {spec.name!r} edit {edit.name!r} does not apply to {tag}: its anchor `{first}` in "
                f"{spec.upstream_class}.{spec.upstream_method}() {what}; re-anchor it in the spec, or keep the pin",
                spec=spec.name,
                edit=edit.name,
                detail=_where_expected(upstream_text, method_text, edit, hits),
            )
        ((hit, size),) = hits
        method = _applied(method, hit, size, edit)
        applied.append(Applied(edit, cst.Module(body=[]).code_for_node(hit.stmt).strip().splitlines()[0]))
    return method, tuple(applied)


def _applied(method: cst.FunctionDef, hit: Hit, size: int, edit: Edit) -> cst.FunctionDef:
    body = list(hit.block.body)
    new = list(cst.parse_module(_dedent(edit.code)).body) if edit.code.strip() else []
    if edit.kind == "before":
        body[hit.index : hit.index] = new
    elif edit.kind == "after":
        body[hit.index + size : hit.index + size] = new
    else:
        old = body[hit.index]
        if new:  # upstream's comments above the anchor stay above what replaces it
            kept = getattr(old, "leading_lines", ())
            new[0] = new[0].with_changes(leading_lines=[*kept, *getattr(new[0], "leading_lines", ())])
        body[hit.index : hit.index + size] = new
    if not body:
        body = [cst.SimpleStatementLine(body=[cst.Pass()])]
    return replace(method, hit.path, hit.block, with_block_body(hit.block, body))

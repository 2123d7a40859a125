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
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst

from generator.builder import astpattern
from generator.builder.anchors import Hit, blocks, replace, with_block_body
from generator.builder.edit_data import Edit, EditedCopy, dedent
from generator.errors import EditDoesNotApply


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


@dataclass(frozen=True)
class _Match:
    hit: Hit
    size: int
    captures: dict[str, astpattern.Captured]
    codes: tuple[str, ...]  # each matched statement's own text (the captures' positions are in these)
    nodes: tuple[ast.stmt, ...]  # each matched statement parsed from its text (what the captures are parts of)


def _matches(module: cst.Module, method: cst.FunctionDef, edit: Edit) -> list[_Match]:
    size = len(astpattern.statements(dedent(edit.anchor)))
    first = type(astpattern.statements(dedent(edit.anchor))[0])
    found = []
    for owner, block, path in blocks(method):
        codes = [module.code_for_node(s).strip("\n") + "\n" for s in block.body]
        nodes = [_as_ast(module, s) for s in block.body]
        for index, node in enumerate(nodes):
            # Only statements of the anchor's first kind can start a match (cheap next to matching).
            if not isinstance(node, first) or None in nodes[index : index + size]:
                continue
            run = [n for n in nodes[index : index + size] if n is not None]
            captures = astpattern.match_run(dedent(edit.anchor), run, 0)
            if captures is not None:
                hit = Hit(owner, block, index, (*path, block))
                found.append(_Match(hit, size, captures, tuple(codes[index : index + size]), tuple(run)))
    return found


def _segment(match: _Match, captured: astpattern.Captured) -> str:
    """Upstream's own text of what a placeholder captured (a run of statements: whole lines, comments kept)."""
    nodes = captured if isinstance(captured, list) else [captured]
    if not nodes:
        return ""
    for code, node in zip(match.codes, match.nodes, strict=True):
        tree = ast.Module(body=[node], type_ignores=[])  # positions are in ``code``, which parsed to ``node``
        for parent in ast.walk(tree):
            for name in ("body", "orelse", "finalbody"):
                block = getattr(parent, name, None)
                if isinstance(block, list) and _same_run(block, nodes):
                    lines = code.splitlines(keepends=True)
                    start = _header_end(code, parent) if name == "body" and parent is not tree else _line(nodes[0]) - 1
                    return "".join(lines[start : getattr(nodes[-1], "end_lineno", None)])
        text = _lines(code, nodes) if isinstance(nodes[0], ast.stmt) else None
        if text is None:
            text = _span(code, nodes)
        if text is not None:
            return text
    # ast's own text of the same code (formatting and comments lost, meaning kept)
    joiner = "\n" if isinstance(nodes[0], ast.stmt) else ", "
    return joiner.join(ast.unparse(n) for n in nodes)


def _lines(code: str, nodes: Sequence[ast.AST]) -> str | None:
    """A run of statements inside a block (not the whole block): its whole lines, dedented.

    Comments between and after its statements (on their lines) come along; comments above its first
    statement belong to what precedes it and stay. None if the run does not start and end its lines.
    """
    first, last = nodes[0], nodes[-1]
    if not isinstance(first, ast.stmt) or not isinstance(last, ast.stmt) or last.end_lineno is None:
        return None
    lines = code.splitlines(keepends=True)
    head = lines[first.lineno - 1].encode()[: first.col_offset].decode()  # ast columns are UTF-8 byte offsets
    tail = lines[last.end_lineno - 1].encode()[last.end_col_offset or 0 :].decode()
    if head.strip() or tail.split("#", 1)[0].strip():
        return None  # `a; b` on one line: the exact span is what is wanted
    text = textwrap.dedent("".join(lines[first.lineno - 1 : last.end_lineno]))
    try:
        same = [ast.dump(n) for n in nodes] == [ast.dump(n) for n in ast.parse(text).body]
    except SyntaxError:
        same = False
    return text if same else None


def _line(node: ast.AST) -> int:
    return int(getattr(node, "lineno", 1))


def _same_run(block: list[ast.AST], nodes: Sequence[ast.AST]) -> bool:
    return len(block) == len(nodes) and all(ast.dump(a) == ast.dump(b) for a, b in zip(block, nodes, strict=True))


def _header_end(code: str, parent: ast.AST) -> int:
    """Where a compound statement's body text starts: the line after its header's colon (0-based).

    The header's last expression can end before closing parentheses (ast positions leave them out),
    so the colon is looked for from there on, past brackets and comments.
    """
    parts = [getattr(parent, f, None) for f in ("test", "iter", "target", "items", "subject")]
    nodes = [n for p in parts if p is not None for n in (p if isinstance(p, list) else [p])]
    ends = [(int(n.end_lineno), int(n.end_col_offset)) for n in nodes if getattr(n, "end_lineno", None)]
    body = getattr(parent, "body")  # noqa: B009 - only compound statements reach here
    if not ends:
        return int(body[0].lineno) - 1
    line, col = max(ends)
    lines = code.splitlines(keepends=True)
    rest = lines[line - 1].encode()[col:].decode()
    for n, text in enumerate([rest, *lines[line:]]):
        bare = text.split("#", 1)[0]
        if ":" in bare:
            return line + n
    return int(body[0].lineno) - 1


def _span(code: str, nodes: Sequence[ast.AST]) -> str | None:
    first, last = nodes[0], nodes[-1]
    if not hasattr(first, "lineno") or not hasattr(last, "end_lineno"):
        return None
    line, col = int(first.lineno), int(first.col_offset)  # type: ignore[attr-defined]
    end_line, end_col = int(last.end_lineno), int(last.end_col_offset)  # type: ignore[attr-defined]
    lines = code.splitlines(keepends=True)
    text = "".join(lines[line - 1 : end_line])
    # ast columns are UTF-8 byte offsets
    start = len(lines[line - 1].encode()[:col].decode())
    cut = len(text) - len(lines[end_line - 1]) + len(lines[end_line - 1].encode()[:end_col].decode())
    segment = text[start:cut]
    # The captured text must be the same code: otherwise a position was off, and guessing is not allowed.
    try:
        ok = [ast.dump(n) for n in nodes] == [ast.dump(n) for n in _reparse(segment, nodes)]
    except SyntaxError:
        ok = False
    return segment if ok else None


def _reparse(segment: str, nodes: Sequence[ast.AST]) -> list[ast.AST]:
    if isinstance(nodes[0], ast.keyword):
        return list(ast.parse(f"f({segment})", mode="eval").body.keywords)  # type: ignore[attr-defined]
    if isinstance(nodes[0], ast.stmt):
        return list(ast.parse(textwrap.dedent(segment)).body)
    return list(ast.parse(f"f({segment})", mode="eval").body.args)  # type: ignore[attr-defined]


def _statements_at(text: str) -> Callable[[re.Match[str]], str]:
    """Upstream's statements at the placeholder line's indentation."""
    return lambda m: textwrap.indent(textwrap.dedent(text), m[1]).rstrip("\n")


def _is_statements(captured: astpattern.Captured) -> bool:
    return isinstance(captured, list) and bool(captured) and isinstance(captured[0], ast.stmt)


def _substitute(code: str, match: _Match, *, parenthesized: bool = False) -> str:
    """The edit's code with each placeholder it shares with the anchor replaced by upstream's captured text.

    One pass over the edit's own code: upstream's text is never searched for another placeholder.
    ``parenthesized``: a one-expression placeholder's text goes in parentheses (its precedence kept).
    """
    out = dedent(code)
    if not match.captures:
        return out
    texts = {name: _segment(match, captured) for name, captured in match.captures.items()}
    names = "|".join(re.escape(n) for n in sorted(match.captures, key=lambda n: (-len(n), n)))
    found = re.compile(rf"^(?P<indent>[ \t]*)(?P<line>{names})[ \t]*$|\*{{0,2}}\b(?P<word>{names})\b", flags=re.M)

    def one(m: re.Match[str]) -> str:
        name = m["line"] or m["word"]
        captured, text = match.captures[name], texts[name]
        if m["line"] is not None:
            if _is_statements(captured):
                return _statements_at(text)(m)
            return m["indent"] + text  # a line that is only an expression placeholder
        if parenthesized and isinstance(captured, ast.expr):
            return f"({text})"
        return text

    return found.sub(one, out)


def _reads_back(code: str, out: str, match: _Match) -> str | None:
    """None if ``out``, read as the edit's code, gives back each shared placeholder's upstream code; else its name."""
    try:
        pattern = astpattern.statements(dedent(code))
        result = ast.parse(out).body
        captures: dict[str, astpattern.Captured] = {}
        matched = astpattern.match_list(pattern, result, captures)
    except (SyntaxError, ValueError):
        return "the whole edit"
    if not matched:
        return "the whole edit"
    for name, upstream in match.captures.items():
        if name in captures and not astpattern.same(captures[name], upstream):
            return name
    return None


def _code_with_upstream(edit: Edit, match: _Match) -> str:
    """The edit's code with upstream's text in place, proven to read back as the edit with upstream's code."""
    out = _substitute(edit.code, match)
    if _reads_back(edit.code, out, match) is None:
        return out
    out = _substitute(edit.code, match, parenthesized=True)
    failed = _reads_back(edit.code, out, match)
    if failed is None:
        return out
    raise _NoReadBack(failed)


class _NoReadBack(Exception):
    """The edit's code with upstream's text in place does not mean the edit with upstream's code (a placeholder)."""


def _numbered(text: str, center: int, around: int = 5) -> str:
    lines = text.splitlines()
    first, last = max(1, center - around), min(len(lines), center + around)
    return "\n".join(f"{n:>5} | {lines[n - 1]}" for n in range(first, last + 1))


def _where_expected(upstream_text: str, spec: EditedCopy, edit: Edit, hits: Sequence[tuple[Hit, int]]) -> str:
    """Upstream's numbered lines at each match, or (none) around the method's line most like the anchor's first."""
    found = [
        m
        for c in ast.parse(upstream_text).body
        if isinstance(c, ast.ClassDef) and c.name == spec.upstream_class
        for m in c.body
        if isinstance(m, ast.FunctionDef) and m.name == spec.upstream_method
    ]
    if not found:
        return ""
    first, last = found[0].lineno, found[0].end_lineno or found[0].lineno
    method_lines = [line.strip() for line in upstream_text.splitlines()[first - 1 : last]]
    wanted = [_one_line(edit.anchor)]
    if hits:
        wanted = [cst.Module(body=[]).code_for_node(h.stmt).strip().splitlines()[0] for h, _ in hits]
    chunks = []
    for line in wanted:
        close = difflib.get_close_matches(line, method_lines, n=1, cutoff=0.0)
        if close:
            chunks.append(_numbered(upstream_text, first + method_lines.index(close[0])))
    return "\n  ...\n".join(chunks)


def _one_line(anchor: str, limit: int = 100) -> str:
    """An anchor as one line for a message: its lines joined (a first line may be a bare ``(``), cut at ``limit``."""
    text = " ".join(line.strip() for line in anchor.splitlines() if line.strip())
    text = text.replace("( ", "(").replace(" )", ")")
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def apply(
    module: cst.Module, method: cst.FunctionDef, spec: EditedCopy, *, tag: str, upstream_text: str
) -> tuple[cst.FunctionDef, tuple[Applied, ...]]:
    """``method`` with the spec's data edits applied, in order; EditDoesNotApply on a missing or repeated anchor."""
    applied = []
    for edit in spec.edits:
        if not edit.written_for(tag):
            raise EditDoesNotApply(
                f"spec {spec.name!r} edit {edit.name!r} is written for vLLM up to {edit.until}, not {tag}: "
                f"{edit.why}; decide in the spec (re-write the edit for {tag}, or drop it), or keep the pin",
                spec=spec.name,
                edit=edit.name,
            )
        found = _matches(module, method, edit)
        hits = [(m.hit, m.size) for m in found]
        if len(hits) != 1:
            what = "not found" if not hits else f"found {len(hits)} times (ambiguous)"
            anchor = _one_line(edit.anchor)
            raise EditDoesNotApply(
                f"spec {spec.name!r} edit {edit.name!r} does not apply to {tag}: its anchor `{anchor}` in "
                f"{spec.upstream_class}.{spec.upstream_method}() {what}; re-anchor it in the spec, or keep the pin",
                spec=spec.name,
                edit=edit.name,
                detail=_where_expected(upstream_text, spec, edit, hits),
            )
        (match,) = found
        try:
            method = _applied(method, match, edit)
        except _NoReadBack as exc:
            raise EditDoesNotApply(
                f"spec {spec.name!r} edit {edit.name!r} does not apply to {tag}: with upstream's text in place of "
                f"{exc}, its code no longer reads as the edit with upstream's code; write that placeholder where "
                "upstream's text can stand (e.g. in parentheses), or keep the pin",
                spec=spec.name,
                edit=edit.name,
                detail=_where_expected(upstream_text, spec, edit, [(match.hit, match.size)]),
            ) from None
        applied.append(Applied(edit, cst.Module(body=[]).code_for_node(match.hit.stmt).strip().splitlines()[0]))
    return method, tuple(applied)


def _unindented_blanks(stmt: cst.BaseStatement) -> cst.BaseStatement:
    """A blank line between the edit's statements stays empty (libcst would indent it to the block)."""
    lines = getattr(stmt, "leading_lines", None)
    if not lines:
        return stmt
    blank = [line.with_changes(indent=False) if line.comment is None else line for line in lines]
    return stmt.with_changes(leading_lines=blank)


def _applied(method: cst.FunctionDef, match: _Match, edit: Edit) -> cst.FunctionDef:
    hit, size = match.hit, match.size
    body = list(hit.block.body)
    new = (
        [_unindented_blanks(st) for st in cst.parse_module(_code_with_upstream(edit, match)).body]
        if edit.code.strip()
        else []
    )
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

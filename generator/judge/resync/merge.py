"""The three-way merge of one function at the statement level: upstream's changes into the tree's copy.

Each block (a function's body, an ``if``'s body, ...) is a sequence of whole statements, compared
as ``ast`` dumps (formatting and comments do not count, nor how an annotation is spelled:
``spelling``). Each side's changes against base are *hunks*: a range of base's statements replaced
by the side's statements (an insertion replaces an empty range); in a replaced run, statements that
pair up by what they are for (``_slot``) are a hunk each. The hunks of the two sides are combined:

- a hunk only one side has goes in; the same hunk on both sides goes in once;
- two hunks whose base ranges overlap, or two different insertions at the same place, are a
  conflict, except one statement both sides changed that is a compound statement of the same kind
  on all three (``if``/``elif``/``else``, ``for``/``while`` with ``else``, ``try`` with its
  ``except`` handlers, ``else`` and ``finally``, ``with``, ``def``; one ``except`` handler): then
  its header and each of its blocks are merged in turn, so an edit and a change inside the same
  statement can both go in;
- an insertion at the edge of the other side's replaced range goes before it (at its start) or
  after it (at its end).

The result's text is the copy's (ours) wherever the statement is ours, and upstream's (theirs)
statement re-indented to the copy's indentation where the statement is theirs, so the tree's
comments and formatting stay. The merge trusts nothing of its own: ``check`` verifies the result
independently before anyone writes it.
"""

from __future__ import annotations

import ast
import copy
import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from generator.judge.resync import spelling

# Fields holding nested statements: a compound statement's header is everything else.
_BLOCKS = ("body", "handlers", "orelse", "finalbody", "cases")
# The statements merged inside when both sides changed them (``match`` is not: its cases have no line of their own).
_COMPOUND = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Try,
    ast.TryStar,
    ast.ExceptHandler,
)
# The blocks after ``body``, in source order, with the line that opens each ("" when its statements
# open themselves: each ``except`` handler is a statement of the ``handlers`` block).
_AFTER_BODY = (("handlers", ""), ("orelse", "else:"), ("finalbody", "finally:"))
Node = ast.stmt | ast.excepthandler


class MergeConflict(Exception):
    """Both sides changed the same statements: ``base``, ``ours``, ``theirs`` are their texts."""

    def __init__(self, base: str, ours: str, theirs: str, line: int) -> None:
        super().__init__(f"both sides changed the statements at the copy's line {line}")
        self.base, self.ours, self.theirs, self.line = base, ours, theirs, line


class Unmergeable(Exception):
    """A text the merge cannot take apart by lines (it does not parse, or holds several statements a line)."""


@dataclass(frozen=True)
class Side:
    """One function's text, parsed: its lines (1-based through ``line``) and its ``def`` node."""

    lines: tuple[str, ...]
    func: ast.FunctionDef | ast.AsyncFunctionDef
    offset: int  # lines the parse wrapper added before the text

    def line(self, number: int) -> str:
        return self.lines[number - self.offset - 1]

    def span(self, first: int, last: int) -> list[str]:
        return list(self.lines[first - self.offset - 1 : last - self.offset])


def parse_function(text: str) -> Side:
    """The one ``def`` a function's text holds, indented or not (a method keeps its class's indentation)."""
    lines = tuple(text.splitlines(keepends=True))
    if lines and not lines[-1].endswith("\n"):
        lines = (*lines[:-1], lines[-1] + "\n")
    first = next((line for line in lines if line.strip()), "")
    indented = bool(first) and first[0] in " \t"
    # An indented def parses as the body of a wrapper; line numbers then count the wrapper's line.
    source = ("if True:\n" if indented else "") + "".join(lines)
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        raise Unmergeable(f"does not parse: {exc}") from None
    body = module.body[0].body if indented and isinstance(module.body[0], ast.If) else module.body
    funcs = [node for node in body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(body) != 1 or len(funcs) != 1:
        raise Unmergeable("is not exactly one function")
    spelling.plain(funcs[0])  # statements compare by meaning; the texts are taken as written
    return Side(lines, funcs[0], 1 if indented else 0)


def _start(node: Node) -> int:
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *(d.lineno for d in decorators)])


def _header_end(side: Side, node: Node) -> int:
    """The last line of a compound statement's header: the line holding its colon.

    ``ast`` gives no position for the colon (nor for ``arguments``), so the header's last node is
    found among its descendants and the colon searched from there; a wrong guess makes a text that
    ``check`` refuses, never a silent write.
    """
    ends = [node.lineno]
    for field, value in ast.iter_fields(node):
        if field in _BLOCKS:
            continue
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, ast.AST):
                ends += [int(getattr(n, "end_lineno", 0) or 0) for n in ast.walk(child)]
    body: list[ast.stmt] = getattr(node, "body", [])
    limit = _start(body[0]) - 1 if body else max(ends)
    for number in range(max(ends), limit + 1):
        if side.line(number).split("#", 1)[0].rstrip().endswith(":"):
            return number
    return max(ends)


def header(node: Node) -> Node:
    """A shallow copy of the statement without its blocks: a compound statement's own expressions."""
    head = copy.copy(node)
    for field in _BLOCKS:
        if isinstance(getattr(head, field, None), list):
            setattr(head, field, [])
    return head


def _header_dump(node: Node) -> str:
    return ast.dump(header(node))


def _indent_of(side: Side, node: Node) -> str:
    line = side.line(_start(node))
    return line[: len(line) - len(line.lstrip(" \t"))]


def _reindent(lines: Sequence[str], old: str, new: str) -> list[str]:
    """Lines moved from one indentation to another; a line not starting with ``old`` (a string's
    continuation) stays as it is, and ``check`` catches a string whose content that would change."""
    if old == new:
        return list(lines)
    return [new + line[len(old) :] if line.startswith(old) else line for line in lines]


@dataclass(frozen=True)
class _Block:
    """A block of statements in one side, with the line after which its first statement's text starts."""

    side: Side
    nodes: tuple[Node, ...]
    after: int  # the header's last line: comments between it and the first statement belong to the first

    def text(self, index: int) -> list[str]:
        """Statement ``index`` with the comments and blank lines above it."""
        node = self.nodes[index]
        top = self.after + 1 if index == 0 else int(self.nodes[index - 1].end_lineno or 0) + 1
        return self.side.span(top, int(node.end_lineno or node.lineno))

    def check_lines(self) -> None:
        previous = self.after
        for node in self.nodes:
            if _start(node) <= previous:
                raise Unmergeable(f"line {_start(node) - self.side.offset} holds more than one statement")
            previous = int(node.end_lineno or node.lineno)


@dataclass(frozen=True)
class _Hunk:
    first: int  # base range [first, last)
    last: int
    nodes: tuple[int, ...]  # the side's statements (indexes into its block)


def _above(block: _Block, index: int) -> list[str]:
    """The comment and blank lines above statement ``index`` of a block (its text before its first line)."""
    node = block.nodes[index]
    text = block.text(index)
    return text[: len(text) - (_end(node) - _start(node) + 1)]


def _hunks(base: _Block, side: _Block, bk: Sequence[str], sk: Sequence[str]) -> list[_Hunk]:
    """The side's changes against base. In a run of replaced statements, the statements that pair up by
    what they are for (``_slot``) are a hunk each, so a statement changed in place can meet the other
    side's change to it alone; the rest of the run stays whole."""
    out: list[_Hunk] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, bk, sk, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if op != "replace":
            out.append(_Hunk(i1, i2, tuple(range(j1, j2))))
            continue
        slots = ([_slot(n) for n in base.nodes[i1:i2]], [_slot(n) for n in side.nodes[j1:j2]])
        for sub, a1, a2, b1, b2 in difflib.SequenceMatcher(None, *slots, autojunk=False).get_opcodes():
            if sub == "equal":
                out += [_Hunk(i1 + a1 + k, i1 + a1 + k + 1, (j1 + b1 + k,)) for k in range(a2 - a1)]
            else:
                out.append(_Hunk(i1 + a1, i1 + a2, tuple(range(j1 + b1, j1 + b2))))
    return out


def _slot(node: Node) -> str:
    """What a statement is for, whatever else changed in it: a compound statement's header (its body may
    differ), what an assignment assigns, what a call statement calls; otherwise its kind alone."""
    kind = type(node).__name__
    if isinstance(node, _COMPOUND):
        return kind + _header_dump(node)
    if isinstance(node, ast.Assign):
        return kind + "".join(ast.dump(t) for t in node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return kind + ast.dump(node.target)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return kind + ast.dump(node.value.func)
    return kind


def _equal_map(base: Sequence[str], side: Sequence[str]) -> dict[int, int]:
    matcher = difflib.SequenceMatcher(None, base, side, autojunk=False)
    return {i1 + k: j1 + k for op, i1, i2, j1, _ in matcher.get_opcodes() if op == "equal" for k in range(i2 - i1)}


def _mergeable_inside(*nodes: Node) -> bool:
    return isinstance(nodes[0], _COMPOUND) and all(type(n) is type(nodes[0]) for n in nodes)


def _end(node: Node) -> int:
    return int(node.end_lineno or node.lineno)


def _keyword_line(side: Side, after: int, first: Node, keyword: str) -> int:
    """The line of ``else:`` / ``finally:`` between a block's end and the next block's first statement."""
    for number in range(after + 1, _start(first)):
        if side.line(number).split("#", 1)[0].strip() == keyword:
            return number
    raise Unmergeable(f"line {_start(first) - side.offset} follows no {keyword!r} line of its own")


def _is_elif(side: Side, orelse: Sequence[Node]) -> bool:
    """An ``if``'s else block written ``elif``: one ``if`` whose own line opens with ``elif``."""
    if len(orelse) != 1 or not isinstance(orelse[0], ast.If):
        return False
    return side.line(orelse[0].lineno)[orelse[0].col_offset :].startswith("elif")


class _Merger:
    def __init__(self, base: Side, ours: Side, theirs: Side) -> None:
        self.base, self.ours, self.theirs = base, ours, theirs

    def _conflict(self, base: list[str], ours: list[str], theirs: list[str], line: int) -> MergeConflict:
        return MergeConflict("".join(base), "".join(ours), "".join(theirs), line - self.ours.offset)

    def block(self, base: _Block, ours: _Block, theirs: _Block, indent: str) -> list[str]:
        """The merged text of one block; ``indent`` is the copy's indentation for its statements."""
        for side in (base, ours, theirs):
            side.check_lines()
        keys = {id(b): [ast.dump(n) for n in b.nodes] for b in (base, ours, theirs)}
        bk, ok, tk = keys[id(base)], keys[id(ours)], keys[id(theirs)]
        mine, upstream = _hunks(base, ours, bk, ok), _hunks(base, theirs, bk, tk)
        stable = _equal_map(bk, ok)
        # Each hunk as (first, last, which side, hunk); combined in base order.
        tagged = sorted(
            [(h.first, h.last, 0, h) for h in mine] + [(h.first, h.last, 1, h) for h in upstream],
            key=lambda t: (t[0], t[1] != t[0], t[2]),
        )
        out: list[str] = []
        at = 0  # next base statement not yet emitted
        i = 0
        while i < len(tagged):
            first, last, who, hunk = tagged[i]
            nxt = tagged[i + 1] if i + 1 < len(tagged) else None
            if first < at:  # a third hunk reaching into a pair already merged: not a case to guess
                raise self._conflict(
                    [line for k in range(first, max(last, first + 1)) if k < len(base.nodes) for line in base.text(k)],
                    [],
                    [],
                    self._line_at(ours, first, bk, ok),
                )
            out += self._stable(base, ours, stable, at, first)
            at = max(at, first)
            if nxt is not None and nxt[2] != who and _overlaps(first, last, nxt[0], nxt[1]):
                o_h, t_h = (hunk, nxt[3]) if who == 0 else (nxt[3], hunk)
                out += self._both(base, ours, theirs, o_h, t_h, indent, bk, ok, tk)
                at = max(last, nxt[1])
                i += 2
                continue
            if who == 1:  # the copy's own comments above what B replaces stay, above B's statements
                out += self._own_comments(base, ours, stable, first, last)
            out += self._take(ours if who == 0 else theirs, hunk.nodes, indent)
            at = max(at, last)
            i += 1
        out += self._stable(base, ours, stable, at, len(base.nodes))
        return out

    def _own_comments(self, base: _Block, ours: _Block, stable: dict[int, int], first: int, last: int) -> list[str]:
        """The comment lines the copy has above base's statements ``first``..``last`` (which it kept, B replaced)
        and A's text does not: the copy's markers and notes (``# plugin begin``), never upstream's own comments,
        which go with what B removed."""
        out: list[str] = []
        for index in range(first, last):
            if index not in stable:
                continue
            upstream = {line.strip() for line in _above(base, index)}
            out += [line for line in _above(ours, stable[index]) if line.strip().startswith("#")]
            out = [line for line in out if line.strip() not in upstream]
        return out

    def _stable(self, base: _Block, ours: _Block, stable: dict[int, int], start: int, end: int) -> list[str]:
        return [line for index in range(start, end) for line in ours.text(stable[index])]

    def _take(self, side: _Block, indexes: Sequence[int], indent: str) -> list[str]:
        out: list[str] = []
        for index in indexes:
            node = side.nodes[index]
            lines = side.text(index)
            out += lines if side.side is self.ours else _reindent(lines, _indent_of(side.side, node), indent)
        return out

    def _both(
        self,
        base: _Block,
        ours: _Block,
        theirs: _Block,
        o_h: _Hunk,
        t_h: _Hunk,
        indent: str,
        bk: list[str],
        ok: list[str],
        tk: list[str],
    ) -> list[str]:
        if (o_h.first, o_h.last) == (t_h.first, t_h.last) and [ok[j] for j in o_h.nodes] == [tk[j] for j in t_h.nodes]:
            return self._take(ours, o_h.nodes, indent)  # the same change on both sides
        one = (o_h.first, o_h.last) == (t_h.first, t_h.last) and o_h.last - o_h.first == 1
        if one and len(o_h.nodes) == len(t_h.nodes) == 1:
            b, o, t = base.nodes[o_h.first], ours.nodes[o_h.nodes[0]], theirs.nodes[t_h.nodes[0]]
            if _mergeable_inside(b, o, t):
                # The comments above the statement are ours' whichever way its inside merges.
                top = ours.text(o_h.nodes[0])
                above = top[: len(top) - (int(o.end_lineno or o.lineno) - _start(o) + 1)]
                return above + self.statement(b, o, t, indent)
        b_lines = [line for k in range(min(o_h.first, t_h.first), max(o_h.last, t_h.last)) for line in base.text(k)]
        o_lines = [line for j in o_h.nodes for line in ours.text(j)]
        t_lines = [line for j in t_h.nodes for line in theirs.text(j)]
        where = _start(ours.nodes[o_h.nodes[0]]) if o_h.nodes else self._line_at(ours, o_h.first, bk, ok)
        raise self._conflict(b_lines, o_lines, t_lines, where)

    def _line_at(self, ours: _Block, base_index: int, bk: list[str], ok: list[str]) -> int:
        stable = _equal_map(bk, ok)
        later = [stable[k] for k in range(base_index, len(bk)) if k in stable]
        if later:
            return _start(ours.nodes[later[0]])
        return int(ours.nodes[-1].end_lineno or ours.after) if ours.nodes else ours.after

    def statement(self, b: Node, o: Node, t: Node, indent: str) -> list[str]:
        """A compound statement both sides changed: header from whichever side changed it, each block merged."""
        sides = (self.base, self.ours, self.theirs)
        nodes = (b, o, t)
        heads = (_header_dump(b), _header_dump(o), _header_dump(t))
        ends = [_header_end(side, n) for side, n in zip(sides, nodes, strict=True)]
        b_head = self.base.span(_start(b), ends[0])
        o_head = self.ours.span(_start(o), ends[1])
        t_head = self.theirs.span(_start(t), ends[2])
        if heads[1] == heads[2] or heads[2] == heads[0]:
            out = o_head
        elif heads[1] == heads[0]:
            out = _reindent(t_head, _indent_of(self.theirs, t), indent)
        else:
            raise self._conflict(b_head, o_head, t_head, _start(o))
        bodies = [_field(n, "body") for n in nodes]
        inner = _indent_of(self.ours, bodies[1][0])
        out += self.block(*_blocks(sides, bodies, ends), inner)
        ends = [_end(body[-1]) for body in bodies]
        for field, keyword in _AFTER_BODY:
            blocks = [_field(n, field) for n in nodes]
            if not any(blocks):
                continue
            if field == "orelse" and isinstance(o, ast.If):
                forms = {_is_elif(s, blk) for s, blk in zip(sides, blocks, strict=True) if blk}
                if len(forms) > 1:  # `elif` on one side, `else:` on another: their texts do not line up
                    raise self._conflict(b_head, o_head, t_head, _start(o))
                keyword = "" if forms == {True} else keyword
            opened = [
                _keyword_line(s, e, blk[0], keyword) if keyword and blk else e
                for s, e, blk in zip(sides, ends, blocks, strict=True)
            ]
            indent_in = (_indent_of(self.ours, blocks[1][0]) if blocks[1] else inner) if keyword else indent
            merged = self.block(*_blocks(sides, blocks, opened), indent_in)
            if merged:  # a block both sides left empty, or emptied, opens with no line at all
                if blocks[1]:
                    out += self.ours.span(ends[1] + 1, opened[1])
                else:
                    out += _reindent(self.theirs.span(ends[2] + 1, opened[2]), _indent_of(self.theirs, t), indent)
                out += merged
            ends = [_end(blk[-1]) if blk else e for blk, e in zip(blocks, ends, strict=True)]
        return out


def _field(node: Node, field: str) -> tuple[Node, ...]:
    return tuple(getattr(node, field, None) or ())


def _blocks(
    sides: Sequence[Side], blocks: Sequence[tuple[Node, ...]], after: Sequence[int]
) -> tuple[_Block, _Block, _Block]:
    base, ours, theirs = (_Block(s, blk, at) for s, blk, at in zip(sides, blocks, after, strict=True))
    return base, ours, theirs


def _overlaps(a1: int, a2: int, b1: int, b2: int) -> bool:
    """Two hunks touch the same base statements, or insert at the same place (or inside the other's range)."""
    if a1 == a2 and b1 == b2:
        return a1 == b1
    if a1 == a2:
        return b1 < a1 < b2
    if b1 == b2:
        return a1 < b1 < a2
    return a1 < b2 and b1 < a2


def merge_function(base: Side, ours: Side, theirs: Side) -> str:
    """The copy with upstream's changes from base to theirs; raises ``MergeConflict`` or ``Unmergeable``."""
    merger = _Merger(base, ours, theirs)
    indent = _indent_of(ours, ours.func)
    lines = merger.statement(base.func, ours.func, theirs.func, indent)
    top = ours.span(ours.offset + 1, _start(ours.func) - 1)  # comments above the def (none in a census slice)
    return "".join(top + lines)

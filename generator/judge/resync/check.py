"""The independent check of a merge: the result is base with both sides' changes, statement for statement.

Nothing of the merge is reused but ``spelling``, the one definition both must share of when two
annotations are the same (``Optional[X]`` is ``X | None``): the four texts are parsed again with
stdlib ``ast``, reduced to the flat statement sequence ``provenance`` compares (a compound statement
by its header, with its depth), and each side's changes against base are found again
(``difflib``). The *expected* sequence is base with every change of both sides applied; the result
must be exactly it. So a result that passes holds every one of upstream's changes from A to B, none
of the statements B removed, and every one of the copy's own edits, in their places. Where the two
sides' changes touch the same statements at this flat level the check reads the four again block
by block (``blockwise``), where changes in different blocks of one compound statement do not meet;
where they meet there too, it refuses (the merge's result is then a conflict, never a write).

Statements can combine cleanly and still not fit: upstream's new statement reads a local the copy
no longer binds (a parameter or an assignment it removed). So the result must read no name
unbound that neither the copy nor B's function reads unbound.

A copy's comments are not statements, and a plugin's markers (``# plugin begin`` / ``# plugin end``) are
how its maintainers find their edits: every comment the copy has that A's function does not must still be
in the result, as often (``tokenize``'s reading, nothing of the merge's).
"""

from __future__ import annotations

import ast
import copy
import difflib
import io
import textwrap
import tokenize
from collections import Counter
from collections.abc import Sequence

from generator.judge import provenance
from generator.judge.resync import blockwise, spelling


def function_of(text: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The one function ``text`` holds, or None when it is not one parsing function."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    indented = first[:1] in (" ", "\t")
    try:
        module = ast.parse(("if True:\n" if indented else "") + text)
    except (SyntaxError, ValueError):
        return None
    body = module.body
    if indented:
        if len(body) != 1 or not isinstance(body[0], ast.If):
            return None
        body = body[0].body
    if len(body) != 1 or not isinstance(body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return body[0]


def _keys(text: str) -> tuple[int, ...] | None:
    """The statement keys of the one function ``text`` holds, or None when it is not one parsing function."""
    func = function_of(text)
    return None if func is None else provenance.reduce(_read(func)).keys  # type: ignore[arg-type]


def _read(func: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The function as its statements are compared: annotations by what they mean (``spelling``)."""
    plain = copy.deepcopy(func)
    spelling.plain(plain)
    return plain


def unbound(func: ast.AST) -> set[str]:
    """The names a function reads that nothing in it binds: globals, builtins, closures, and its mistakes.

    Any binding anywhere in the function counts (a comprehension's variable too): a looser reading,
    so a name found here is surely unbound in the function."""
    read: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not func:
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
    return read - bound


def _changes(base: Sequence[int], side: Sequence[int]) -> list[tuple[int, int, tuple[int, ...]]]:
    matcher = difflib.SequenceMatcher(None, base, side, autojunk=False)
    return [(i1, i2, tuple(side[j1:j2])) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"]


def expected(base: Sequence[int], ours: Sequence[int], theirs: Sequence[int]) -> tuple[int, ...] | str:
    """Base with both sides' changes, or why the two sides cannot be combined at this level."""
    mine, upstream = _changes(base, ours), _changes(base, theirs)
    for a1, a2, a_new in mine:
        for b1, b2, b_new in upstream:
            if (a1, a2, a_new) == (b1, b2, b_new):
                continue
            pure_a, pure_b = a1 == a2, b1 == b2
            clash = (
                a1 == b1
                if pure_a and pure_b
                else (b1 < a1 < b2)
                if pure_a
                else (a1 < b1 < a2)
                if pure_b
                else (a1 < b2 and b1 < a2)
            )
            if clash and pure_a and pure_b:
                return f"both sides insert statements before base statement {a1 + 1}"
            if clash:
                return f"both sides change base statements {min(a1, b1) + 1}..{max(a2, b2)}"
    changes = sorted(set(mine) | set(upstream), key=lambda c: (c[0], c[1] != c[0]))
    out: list[int] = []
    at = 0
    for first, last, new in changes:
        out += base[at:first]
        out += new
        at = max(at, last)
    out += base[at:]
    return tuple(out)


def _recounted(base: Counter[str], ours: Counter[str], theirs: Counter[str], result: Counter[str]) -> str | None:
    """None when each statement whose count one side alone changed is in the result that side's number of
    times, and each whose count neither changed is as in base; else the first (its header) that is not.

    In sequence a change can look clean and still undo one side: upstream moves a statement the copy
    removed, and the sequences see a deletion both sides made and upstream's insertion elsewhere.
    Counted, only the copy changed how often it stands, and the result must not hold it. A count both
    sides changed is left to the sequences: two new ``return`` lines may be one change or two."""
    for key in sorted(base.keys() | ours.keys() | theirs.keys() | result.keys()):
        own, upstream = ours[key] - base[key], theirs[key] - base[key]
        if own and upstream:
            continue
        if result[key] != base[key] + own + upstream:
            return key
    return None


def problems(base: str, ours: str, theirs: str, result: str) -> str:
    """Empty when ``result`` is exactly base with ours' and theirs' changes; else the one-line reason."""
    funcs = [function_of(text) for text in (base, ours, theirs, result)]
    names = ("upstream's function at A", "the copy", "upstream's function at B", "the merged copy")
    parsed: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for name, func in zip(names, funcs, strict=True):
        if func is None:
            return f"{name} is not one function that parses"
        parsed.append(func)
    read = [_read(func) for func in parsed]
    b, o, t, r = (provenance.reduce(func).keys for func in read)  # type: ignore[arg-type]
    want = expected(b, o, t)
    if isinstance(want, str):
        # Flat, two changes in different blocks can meet; read block by block, they may not.
        nested = blockwise.expected(*read[:3])
        if isinstance(nested, str) or nested != blockwise.flat([blockwise.item(read[3])]):
            return want
    elif want != r:
        diff = _changes(want, r)
        first = diff[0][0] + 1 if diff else 0
        return f"the merged copy is not base with both sides' changes (first difference at statement {first})"
    miscounted = _recounted(*(blockwise.heads(func) for func in read))
    if miscounted is not None:
        line = blockwise.spelled(miscounted, *read)
        return f"the merged copy holds `{line}` as often as no combination of both sides' changes does"
    new = unbound(parsed[3]) - unbound(parsed[1]) - unbound(parsed[2])
    if new:
        return f"the merged copy reads {', '.join(sorted(new))} which nothing in it binds (one side removed it)"
    lost = comments(ours) - comments(base) - comments(result)
    if lost:
        return f"the merged copy drops the copy's own comment `{sorted(lost)[0]}`"
    return ""


def comments(text: str) -> Counter[str]:
    """Each comment of a function's text (as ``tokenize`` reads them), by its words, counted."""
    found: Counter[str] = Counter()
    try:
        for token in tokenize.generate_tokens(io.StringIO(textwrap.dedent(text)).readline):
            if token.type == tokenize.COMMENT:
                found[token.string.strip()] += 1
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # unreadable: the statement checks above have spoken
    return found

"""Which vLLM release a copy of ``schedule()`` is: exactly one, or the closest and by how much.

Both sides are reduced to *statements*: every statement of the method, a compound one by its
header alone (``if <test>:``, ``for ... in ...:``), each with its depth, compared as ``ast`` dumps
(formatting and comments do not count). Two methods with the same statements are the same AST.
The statements that differ from a release, grouped into runs, are the copy's edits against it.

Upstream files are parsed once per process (keyed by content), so scanning every release for
each of many copies costs one parse per release plus one sequence diff per pair.
"""

from __future__ import annotations

import ast
import copy
import difflib
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from generator.builder.verify import methods_named
from generator.errors import UpstreamShapeError

UPSTREAM_CLASS = "Scheduler"
METHOD = "schedule"
# The first vLLM release vllm-ascend carried the patch for: where a scan starts by default.
FIRST_RELEASE = "v0.13.0"
# Fields holding nested statements: a compound statement's header is everything else.
_BLOCKS = ("body", "handlers", "orelse", "finalbody", "cases")


@dataclass(frozen=True)
class Statement:
    key: int  # depth and ast dump, interned: equal keys are equal statements
    depth: int
    first: int
    last: int
    code: str  # the header's first line, for messages


@dataclass(frozen=True)
class Method:
    """One ``schedule()`` reduced to its statements (the signature is the first)."""

    statements: tuple[Statement, ...]

    @property
    def keys(self) -> tuple[int, ...]:
        return tuple(s.key for s in self.statements)


_INTERNED: dict[str, int] = {}


def _intern(depth: int, dump: str) -> int:
    """A statement's key: a 64-bit hash of its depth and dump, the same in every process (a census index is
    cached by its keys); equal statements have equal keys, and distinct ones collide with odds of 2^-64."""
    text = f"{depth}|{dump}"
    key = _INTERNED.get(text)
    if key is None:
        key = _INTERNED[text] = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
    return key


def _header(node: ast.AST) -> ast.AST:
    head = copy.copy(node)
    for field in _BLOCKS:
        if isinstance(getattr(head, field, None), list):
            setattr(head, field, [])
    return head


def _header_last_line(node: ast.AST) -> int:
    first: int = _line(node)
    ends = [
        getattr(child, "end_lineno", None) or first
        for field, value in ast.iter_fields(node)
        if field not in _BLOCKS
        for child in (value if isinstance(value, list) else [value])
        if isinstance(child, ast.AST) and not isinstance(child, (ast.expr_context, ast.operator))
    ]
    return max([first, *ends])


def _first_line(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except (ValueError, TypeError, AttributeError, RecursionError):  # a header alone may not unparse
        text = type(node).__name__
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= 100 else line[:97] + "..."


def _line(node: ast.AST) -> int:
    """A node's first line; a ``match`` case has none of its own, its pattern does."""
    if isinstance(node, ast.match_case):
        return int(node.pattern.lineno)
    return int(getattr(node, "lineno", 0))


def _walk(node: ast.AST, depth: int) -> Iterator[Statement]:
    head = _header(node)
    is_compound = any(isinstance(getattr(node, f, None), list) and getattr(node, f) for f in _BLOCKS)
    last = _header_last_line(node) if is_compound else (getattr(node, "end_lineno", None) or _line(node))
    code = _first_line(node) if not is_compound else _first_line(_with_pass(head))
    yield Statement(_intern(depth, ast.dump(head)), depth, _line(node), max(last, _line(node)), code)
    for field in _BLOCKS:
        children = getattr(node, field, None)
        if not (isinstance(children, list) and children):
            continue
        if field not in ("body", "handlers", "cases"):  # `else:` and `finally:` are lines of their own
            at = _line(children[0])
            yield Statement(_intern(depth, f"<{field}>"), depth, at, at, f"{field}:")
        for child in children:
            yield from _walk(child, depth + 1)


def _with_pass(head: ast.AST) -> ast.AST:
    shown = copy.copy(head)
    for field in ("body",):
        if isinstance(getattr(shown, field, None), list):
            setattr(shown, field, [ast.Pass()])
    return shown


def reduce(func: ast.FunctionDef) -> Method:
    """The method's statements, the ``def`` line (signature, decorators) first."""
    signature = Statement(
        _intern(0, ast.dump(_header(func))), 0, func.lineno, _header_last_line(func), _first_line(_with_pass(func))
    )
    return Method((signature, *statements(func.body)))


def statements(nodes: Sequence[ast.stmt], depth: int = 1) -> tuple[Statement, ...]:
    """The statements of a block (a method's body is at depth 1)."""
    return tuple(s for node in nodes for s in _walk(node, depth))


@lru_cache(maxsize=256)
def _parsed(sha256: str, text: str) -> ast.FunctionDef:
    del sha256  # the cache key; the text is what is parsed
    try:
        found = methods_named(ast.parse(text), UPSTREAM_CLASS, METHOD)
    except SyntaxError as exc:
        raise UpstreamShapeError(f"an upstream scheduler.py does not parse (line {exc.lineno})") from None
    if len(found) != 1:
        raise UpstreamShapeError(f"an upstream scheduler.py has {len(found)} {UPSTREAM_CLASS}.{METHOD}()")
    return found[0]


def upstream_function(text: str) -> ast.FunctionDef:
    """Upstream's ``Scheduler.schedule()``, parsed once per content. Shared: callers must not change it."""
    return _parsed(hashlib.sha256(text.encode()).hexdigest(), text)


@lru_cache(maxsize=256)
def _reduced(sha256: str, text: str) -> Method:
    return reduce(_parsed(sha256, text))


def upstream_method(text: str) -> Method:
    return _reduced(hashlib.sha256(text.encode()).hexdigest(), text)


@dataclass(frozen=True)
class Edit:
    """One run of statements where a copy differs from a release."""

    copy: tuple[Statement, ...]  # the copy's statements in the run (none: the copy drops upstream's)
    upstream: tuple[Statement, ...]  # the release's statements in the run (none: the copy adds these)

    @property
    def statements(self) -> int:
        return max(len(self.copy), len(self.upstream))

    def describe(self, release: str) -> str:
        if not self.upstream:
            return f"{_lines(self.copy)} added: {_shown(self.copy)}"
        if not self.copy:
            return f"drops {release}'s {_lines(self.upstream)}: {_shown(self.upstream)}"
        theirs = f"{release}'s {_lines(self.upstream)} {_shown(self.upstream)}"
        return f"{_lines(self.copy)} {_shown(self.copy)} instead of {theirs}"


def _lines(run: Sequence[Statement]) -> str:
    first, last = min(s.first for s in run), max(s.last for s in run)
    return f"line {first}" if first == last else f"lines {first}-{last}"


def _shown(run: Sequence[Statement]) -> str:
    """The run's outermost statement first (a run can start inside a block it then leaves)."""
    top = min(run, key=lambda s: s.depth)
    more = f" (+{len(run) - 1} more)" if len(run) > 1 else ""
    return f"`{top.code}`{more}"


def edits(copy_method: Method, release: Method) -> tuple[Edit, ...]:
    a, b = copy_method.keys, release.keys
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    out = []
    for n, (op, i1, i2, j1, j2) in enumerate(ops):
        if op == "equal":
            continue
        # A run only one side has can often sit one statement later as well (`if x: break` added after
        # another `if y: break`): slide it as far as the equal run after it allows, so that it starts
        # at the statement that was really added, not inside the one before it.
        after = ops[n + 1] if n + 1 < len(ops) and ops[n + 1][0] == "equal" else None
        if after is not None and op == "delete":
            while i2 < after[2] and a[i1] == a[i2]:
                i1, i2 = i1 + 1, i2 + 1
        elif after is not None and op == "insert":
            while j2 < after[4] and b[j1] == b[j2]:
                j1, j2 = j1 + 1, j2 + 1
        out.append(Edit(copy_method.statements[i1:i2], release.statements[j1:j2]))
    return tuple(out)


def distance(copy_method: Method, release: Method, bound: int | None = None) -> int | None:
    """Statements that differ (a changed one counts once), or None when surely more than ``bound``."""
    a, b = copy_method.keys, release.keys
    if bound is not None and abs(len(a) - len(b)) > bound:
        return None
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    # Each statement that is in neither side's matching blocks counts; a lower bound first.
    if bound is not None and max(len(a), len(b)) - _upper_matches(matcher, len(a) + len(b)) > bound:
        return None
    return sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal")


def _upper_matches(matcher: difflib.SequenceMatcher[int], total: int) -> int:
    """At most this many statements match (``quick_ratio``'s multiset bound, as a count)."""
    return round(matcher.quick_ratio() * total / 2) if total else 0


@dataclass(frozen=True)
class Release:
    tag: str
    text: str  # upstream scheduler.py at that tag


@dataclass(frozen=True)
class Found:
    """Where a copy comes from, against the releases scanned (oldest first)."""

    tags: tuple[str, ...]  # the releases it equals exactly; or, when none, the closest
    exact: bool
    differing: int  # statements that differ from tags[-1] (0 when exact)
    edits: tuple[Edit, ...]  # against tags[-1]
    scanned: int

    @property
    def tag(self) -> str:
        return self.tags[-1]


def locate(copy_method: Method, releases: Sequence[Release], near: str) -> Found:
    """The releases ``copy_method`` equals, else the closest one (ties: nearest to ``near``, then newest).

    ``releases`` are in release order; ``near`` is the tag the copy is paired with.
    """
    if not releases:
        raise ValueError("no releases to compare with")
    methods = [(r.tag, upstream_method(r.text)) for r in releases]
    exact = tuple(tag for tag, method in methods if method.keys == copy_method.keys)
    if exact:
        return Found(exact, True, 0, (), len(methods))
    order = {tag: i for i, (tag, _) in enumerate(methods)}
    anchor = order.get(near, len(methods) - 1)
    best: tuple[int, int, int, str] | None = None
    seen: dict[tuple[int, ...], int | None] = {}
    # Nearest releases first, so the bound from a close one prunes far ones early.
    for tag, method in sorted(methods, key=lambda m: (abs(order[m[0]] - anchor), -order[m[0]])):
        if method.keys not in seen:
            seen[method.keys] = distance(copy_method, method, None if best is None else best[0])
        found = seen[method.keys]
        if found is None:
            continue
        rank = (found, abs(order[tag] - anchor), -order[tag], tag)
        if best is None or rank < best:
            best = rank
    assert best is not None
    tag = best[3]
    release = dict(methods)[tag]
    return Found((tag,), False, best[0], edits(copy_method, release), len(methods))


def releases_between(releases: Sequence[Release], older: str, newer: str) -> int | None:
    """How many releases ``newer`` is after ``older`` in ``releases`` (negative: before); None if unknown."""
    order = [r.tag for r in releases]
    if older not in order or newer not in order:
        return None
    return order.index(newer) - order.index(older)

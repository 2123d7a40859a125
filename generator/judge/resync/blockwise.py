"""The check's second reading: block by block, for changes that meet only in the flat sequence.

The flat reading (``check.expected``) lines up every statement of the function at once, so two
changes in different blocks can land on one flat position: the copy appends a statement to an
``if``'s body and upstream inserts one after the ``if``. Flat, both insert at the same place and
the order is unknowable; in the tree of blocks the two are in different places and the answer is
plain. This reading is asked only when the flat one refuses, and it is as strict: a change of one
side meets a change of the other only when each replaced the same one statement by one statement,
a compound statement of the same kind on all three (its header from the side that changed it, each
of its blocks read the same way); anything else that meets is refused.

Nothing of the merge is used: the texts are read again with stdlib ``ast`` and ``difflib``.
"""

from __future__ import annotations

import ast
import copy
import difflib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

# The fields that hold a compound statement's blocks, in source order. A ``match``'s cases are not
# opened: they are part of its key and header alike, so a change in one is a change of the whole.
# The kinds opened are listed again rather than taken from ``merge``: the check shares nothing with it.
_FIELDS = ("body", "handlers", "orelse", "finalbody")
_OPENED = (
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


@dataclass(frozen=True)
class Item:
    """One statement: ``key`` the whole of it, ``head`` what is left without its blocks."""

    kind: str
    key: str
    head: str
    blocks: tuple[tuple[Item, ...], ...]  # one per field of _FIELDS, empty for a simple statement
    opened: bool


def item(node: ast.AST) -> Item:
    if not isinstance(node, _OPENED):
        dump = ast.dump(node)
        return Item(type(node).__name__, dump, dump, (), False)
    head = copy.copy(node)
    blocks: list[tuple[Item, ...]] = []
    for field in _FIELDS:
        children = getattr(node, field, None)
        blocks.append(tuple(item(child) for child in children or ()))
        if isinstance(children, list):
            setattr(head, field, [])
    return Item(type(node).__name__, ast.dump(node), ast.dump(head), tuple(blocks), True)


def flat(items: Sequence[Item], depth: int = 0) -> list[tuple[int, str]]:
    """The items as (depth, header) in source order, each non-empty block opened by its field's name."""
    out: list[tuple[int, str]] = []
    for statement in items:
        out.append((depth, statement.head))
        for field, children in zip(_FIELDS, statement.blocks, strict=False):
            if children:
                out.append((depth, field))
                out += flat(children, depth + 1)
    return out


def heads(node: ast.AST) -> Counter[str]:
    """How often each statement stands in a function at any depth (a compound one by its header)."""
    return Counter(head for _, head in flat([item(node)]) if head not in _FIELDS)


def spelled(key: str, *funcs: ast.AST) -> str:
    """The first line of the statement whose header is ``key``, for a reason a person reads."""
    for func in funcs:
        for node in ast.walk(func):
            if isinstance(node, (ast.stmt, ast.excepthandler)) and item(node).head == key:
                return ast.unparse(node).splitlines()[0]
    return "a statement"


Change = tuple[int, int, tuple[Item, ...]]  # base range [first, last) replaced by the side's items


def _changes(base: Sequence[Item], side: Sequence[Item]) -> list[Change]:
    """The side's changes; in a replaced run, a compound statement whose header is the only one of its
    kind in the run on both sides is a change of its own (changed inside), so the other side's change
    inside it can be read there. A header found twice could pair either way: the run stays whole."""
    matcher = difflib.SequenceMatcher(None, [i.key for i in base], [i.key for i in side], autojunk=False)
    out: list[Change] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        old, new = base[i1:i2], side[j1:j2]
        heads = [h.head for h in (*old, *new) if h.opened]
        unique = {h for h in heads if heads.count(h) == 2 and sum(i.head == h for i in old) == 1}
        tags = (
            [i.head if i.head in unique else f"{k}<" for k, i in enumerate(old)],
            [i.head if i.head in unique else f"{k}>" for k, i in enumerate(new)],
        )
        for sub, a1, a2, b1, b2 in difflib.SequenceMatcher(None, *tags, autojunk=False).get_opcodes():
            if sub == "equal":
                out += [(i1 + a1 + k, i1 + a1 + k + 1, (new[b1 + k],)) for k in range(a2 - a1)]
            else:
                out.append((i1 + a1, i1 + a2, tuple(new[b1:b2])))
    return out


def _meet(a: Change, b: Change) -> bool:
    (a1, a2, _), (b1, b2, _) = a, b
    if a1 == a2 and b1 == b2:
        return a1 == b1
    if a1 == a2:
        return b1 < a1 < b2
    if b1 == b2:
        return a1 < b1 < a2
    return a1 < b2 and b1 < a2


def one(base: Item, ours: Item, theirs: Item) -> Item | str:
    """One statement as both sides leave it, or why that cannot be said."""
    if ours.key == theirs.key or theirs.key == base.key:
        return ours
    if ours.key == base.key:
        return theirs
    if not (base.opened and base.kind == ours.kind == theirs.kind):
        return "both sides change one statement"
    if ours.head == theirs.head or theirs.head == base.head:
        head = ours.head
    elif ours.head == base.head:
        head = theirs.head
    else:
        return "both sides change one compound statement's header"
    blocks: list[tuple[Item, ...]] = []
    for b, o, t in zip(base.blocks, ours.blocks, theirs.blocks, strict=True):
        found = block(b, o, t)
        if isinstance(found, str):
            return found
        blocks.append(found)
    return Item(base.kind, "", head, tuple(blocks), True)


def block(base: Sequence[Item], ours: Sequence[Item], theirs: Sequence[Item]) -> tuple[Item, ...] | str:
    """A block as base with both sides' changes, or why they cannot be combined."""
    mine, upstream = _changes(base, ours), _changes(base, theirs)
    met: dict[int, Change] = {}  # base index -> the one statement both sides replaced, combined
    for a in mine:
        for b in upstream:
            if a == b or not _meet(a, b):
                continue
            single = a[1] - a[0] == b[1] - b[0] == 1 and a[0] == b[0] and len(a[2]) == len(b[2]) == 1
            if not single or a[0] in met:
                return f"both sides change base statements {min(a[0], b[0]) + 1}..{max(a[1], b[1])} of a block"
            found = one(base[a[0]], a[2][0], b[2][0])
            if isinstance(found, str):
                return found
            met[a[0]] = (a[0], a[1], (found,))
    changes = [c for c in mine + upstream if not (c[1] - c[0] == 1 and c[0] in met)] + list(met.values())
    out: list[Item] = []
    at = 0
    for first, last, new in sorted(set(changes), key=lambda c: (c[0], c[1] != c[0])):
        out += base[at:first]
        out += new
        at = max(at, last)
    out += base[at:]
    return tuple(out)


def expected(base: ast.AST, ours: ast.AST, theirs: ast.AST) -> list[tuple[int, str]] | str:
    """The function as base with both sides' changes, flat (``flat``), or why it cannot be said."""
    found = one(item(base), item(ours), item(theirs))
    return found if isinstance(found, str) else flat([found])

"""Which upstream function a tree function is a copy of: the thresholds, and the closest of those that pass."""

from __future__ import annotations

import difflib
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from generator.judge.census.index import Table, UpstreamIndex
from generator.judge.census.reading import MIN_MATCHED, MIN_SHARE, Function


@dataclass(frozen=True)
class Comparison:
    matched: int  # statements that are the same, in order
    differing: int  # statements that differ (a changed one counts once), as provenance.distance counts


def compare(copy: Sequence[int], upstream: Sequence[int]) -> Comparison:
    """Two functions' statement keys compared: one alignment gives both counts."""
    ops = difflib.SequenceMatcher(None, copy, upstream, autojunk=False).get_opcodes()
    matched = sum(i2 - i1 for op, i1, i2, _, _ in ops if op == "equal")
    differing = sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in ops if op != "equal")
    return Comparison(matched, differing)


def accepted(matched: int, copy_size: int, upstream_size: int) -> bool:
    """The thresholds: enough statements in common, and most of the longer function's."""
    return matched >= MIN_MATCHED and matched >= MIN_SHARE * max(copy_size, upstream_size)


@dataclass(frozen=True)
class Match:
    """A tree function and the upstream function (in the index) it is a copy of."""

    function: Function
    upstream: Function
    comparison: Comparison
    alternatives: tuple[tuple[Function, int], ...]  # other upstream functions that qualify, and their differing


def _likeness(function: Function, upstream: Function) -> float:
    """How alike the two names are (file stem and qualified name), to choose among equally close copies."""
    a = f"{Path(function.path).stem}:{function.qualname}".lower()
    b = f"{Path(upstream.path).stem}:{upstream.qualname}".lower()
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def match(function: Function, index: UpstreamIndex) -> Match | None:
    """The same-named upstream function ``function`` is a copy of (thresholds above), or None."""
    if function.size < MIN_MATCHED:
        return None
    table = index.inverted(function.name)
    return _closest_in(function, table, Counter(function.keys)) if table else None


# With --renamed, a statement in more upstream functions than this (``return x``, a ``super().__init__()``)
# finds no candidates by itself: candidates come from the rarer statements a copy must share too.
COMMON_POSTINGS = 200


def match_renamed(function: Function, index: UpstreamIndex) -> Match | None:
    """The upstream function of any name ``function`` is a copy of (the same thresholds), or None."""
    if function.size < MIN_MATCHED:
        return None
    table = index.everything()
    mine = Counter(function.keys)
    rare = Counter({k: n for k, n in mine.items() if len(table.get(k, ())) <= COMMON_POSTINGS})
    common = sum(mine.values()) - sum(rare.values())
    # A copy shares at least this many statements; when the common ones cannot make up all of them, it
    # shares a rare one, so looking up the rare ones alone misses no copy.
    need = max(MIN_MATCHED, math.ceil(MIN_SHARE * function.size))
    return _closest_in(function, table, rare, common) if need > common else _closest_in(function, table, mine)


def _closest_in(function: Function, table: Table, looked_up: Counter[int], unseen: int = 0) -> Match | None:
    """The closest accepted function of ``table``; ``unseen``: statements of ``function`` not looked up."""
    # An upper bound on statements in common (the multiset intersection), from the inverted table.
    shared: dict[int, int] = defaultdict(int)
    holders: dict[int, Function] = {}
    for key, times in looked_up.items():
        for upstream, theirs in table.get(key, ()):
            shared[id(upstream)] += min(times, theirs)
            holders[id(upstream)] = upstream
    found: list[tuple[int, float, Function, Comparison]] = []
    for ident, bound in shared.items():
        upstream = holders[ident]
        if not accepted(bound + unseen, function.size, upstream.size):
            continue
        compared = compare(function.keys, upstream.keys)
        if accepted(compared.matched, function.size, upstream.size):
            found.append((compared.differing, -_likeness(function, upstream), upstream, compared))
    if not found:
        return None
    found.sort(key=lambda f: (f[0], f[1], f[2].path, f[2].line))
    _, _, upstream, compared = found[0]
    return Match(function, upstream, compared, tuple((f[2], f[0]) for f in found[1:]))


def outermost(matches: list[Match]) -> list[Match]:
    """A function nested in a copy is part of that copy (0.32's schedule() defines ``skip_request``), not another."""
    copied = {(m.function.path, m.function.qualname) for m in matches}

    def inside_a_copy(m: Match) -> bool:
        parts = m.function.qualname.split(".<locals>.")
        return any((m.function.path, ".<locals>.".join(parts[:i])) in copied for i in range(1, len(parts)))

    return [m for m in matches if not inside_a_copy(m)]

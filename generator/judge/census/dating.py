"""Each copy across releases: the closest release of its upstream function, and how stale it is against the pin."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from generator.judge import provenance
from generator.judge.census.matching import compare
from generator.judge.census.reading import Function, functions, parse_or_empty
from generator.sources.base import Progress, no_progress
from generator.sources.resolve import fetch_release_files
from generator.tags import version_key, version_of

# Reads files of vLLM's package at a release: (tag, paths) -> path -> text (None: the release has no such file).
ReleaseReader = Callable[[str, Collection[str]], Mapping[str, str | None]]


@dataclass(frozen=True)
class Dated:
    """Where a copy stands across the releases scanned."""

    tag: str  # the closest release: the fewest differing statements, nearest the pin (before it, else after)
    differing: int  # statements that differ from ``tag``'s function (0: the copy is that function)
    same: tuple[str, ...]  # the releases whose function is ``tag``'s, statement for statement (``tag`` among them)
    edits: tuple[provenance.Edit, ...]  # against ``tag``
    scanned: tuple[str, ...]  # the releases that have the function, in release order
    stale: int | None  # releases from ``tag`` to the pin (negative: after the pin); None if the pin was not scanned

    @property
    def exact(self) -> bool:
        return self.differing == 0


# One copy to date: the tree's function, and the upstream file and qualified name it copies.
Request = tuple[Function, str, str]


def date(copy: Function, path: str, qualname: str, texts: Mapping[str, str | None], pin: str | None) -> Dated | None:
    """Compare ``copy`` with ``qualname`` of ``path`` at each release (``texts``: tag -> file, in release order)."""
    return date_all([(copy, path, qualname)], {path: texts}, pin)[0]


def date_all(
    requests: Sequence[Request], texts: Mapping[str, Mapping[str, str | None]], pin: str | None
) -> list[Dated | None]:
    """``date`` for many copies: each release file is parsed once for all the copies of its functions.

    ``texts``: upstream path -> tag -> file (release order; None: the release has no such file). The
    copies' nodes must be there (their edits are computed from them).
    """
    wanted: dict[str, set[str]] = defaultdict(set)
    for _, path, qualname in requests:
        wanted[path].add(qualname)
    # path -> tag -> qualname -> the keys of each def so named (a property's setter, a def per branch)
    variants: dict[str, dict[str, dict[str, list[tuple[int, ...]]]]] = {}
    by_text: dict[str, tuple[int, ...]] = {}  # a function's own text -> its keys: most releases keep most functions
    for path, tags in texts.items():
        parsed: dict[str, dict[str, list[tuple[int, ...]]]] = {}
        variants[path] = {}
        for tag, text in tags.items():
            if text is None:
                continue
            digest = hashlib.sha256(text.encode()).hexdigest()
            if digest not in parsed:
                parsed[digest] = _variants(text, path, wanted[path], by_text)
            variants[path][tag] = parsed[digest]
    chosen: list[_Pick | None] = []
    for copy, path, qualname in requests:
        scored: list[tuple[str, int, tuple[int, ...]]] = []
        for tag, found in variants.get(path, {}).items():
            if qualname not in found:
                continue
            # Of several defs so named: the closest.
            best = min(((compare(copy.keys, k).differing, k) for k in found[qualname]), key=lambda b: b[0])
            scored.append((tag, *best))
        if not scored:
            chosen.append(None)
            continue
        order = tuple(tag for tag, _, _ in scored)
        fewest = min(n for _, n, _ in scored)
        tag, differing, keys = scored[_nearest([i for i, s in enumerate(scored) if s[1] == fewest], order, pin)]
        same = tuple(t for t, _, k in scored if k == keys)
        chosen.append(_Pick(tag, differing, keys, same, order))
    # The edits, against each chosen release's function: its file parsed again, once.
    edits: dict[int, tuple[provenance.Edit, ...]] = {}
    need: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, pick in enumerate(chosen):
        if pick is not None and pick.differing:
            need[(requests[i][1], pick.tag)].append(i)
    for (path, tag), indexes in need.items():
        text = texts[path][tag]
        assert text is not None
        funcs = functions(parse_or_empty(text, path), path)
        for i in indexes:
            copy, _, qualname = requests[i]
            keys = chosen[i].keys  # type: ignore[union-attr]  # only picks are in need
            theirs = next(f for f in funcs if f.qualname == qualname and f.keys == keys)
            edits[i] = provenance.edits(copy.method(), theirs.method())
    return [
        None
        if pick is None
        else Dated(pick.tag, pick.differing, pick.same, edits.get(i, ()), pick.order, _stale(pick.tag, pin, pick.order))
        for i, pick in enumerate(chosen)
    ]


@dataclass(frozen=True)
class _Pick:
    tag: str
    differing: int
    keys: tuple[int, ...]
    same: tuple[str, ...]
    order: tuple[str, ...]


def _variants(
    text: str, path: str, qualnames: Collection[str], by_text: dict[str, tuple[int, ...]]
) -> dict[str, list[tuple[int, ...]]]:
    """The keys of each def of ``qualnames`` in a release file; nothing of the parse is kept."""
    lines = text.splitlines()
    out: dict[str, list[tuple[int, ...]]] = defaultdict(list)
    for func in functions(parse_or_empty(text, path), path):
        if func.qualname not in qualnames or func.node is None:
            continue
        first = min([func.line, *(d.lineno for d in func.node.decorator_list)])
        own = hashlib.sha256("\n".join(lines[first - 1 : func.node.end_lineno or func.line]).encode()).hexdigest()
        if own not in by_text:
            by_text[own] = func.keys
        out[func.qualname].append(by_text[own])
    return dict(out)


def _nearest(indexes: Sequence[int], order: Sequence[str], pin: str | None) -> int:
    """Of ``indexes`` into ``order``: the pin's, else the newest before it, else the oldest after it."""
    if pin is None:
        return indexes[-1]
    key = version_key(version_of(pin))
    before = [i for i in indexes if version_key(version_of(order[i])) <= key]
    return before[-1] if before else indexes[0]


def _stale(tag: str, pin: str | None, tags: Sequence[str]) -> int | None:
    if pin is None or pin not in tags:
        return None
    return list(tags).index(pin) - list(tags).index(tag)


def release_reader(progress: Progress = no_progress, refresh: bool = False) -> ReleaseReader:
    """Reads from the release wheels on the package index, through the cache (``resolve.fetch_release_files``)."""

    def read(tag: str, paths: Collection[str]) -> dict[str, str | None]:
        found = fetch_release_files(tag, paths, progress, refresh=refresh)
        return {p: None if data is None else data.decode("utf-8", errors="replace") for p, data in found.items()}

    return read

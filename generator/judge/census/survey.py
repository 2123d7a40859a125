"""The whole census: read the tree, index upstream, match every function, date each copy across releases."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from generator.errors import UsageError
from generator.judge.census.dating import Dated, ReleaseReader, date_all
from generator.judge.census.index import Source, UpstreamIndex, defined_names
from generator.judge.census.matching import Match, match, match_renamed, outermost
from generator.judge.census.reading import MIN_MATCHED, Function, Skipped, functions, parse_or_empty, read_functions
from generator.sources.base import Progress, no_progress


@dataclass(frozen=True)
class Copy:
    match: Match
    dated: Dated | None  # None: no release scanned has the function (or no releases were scanned)

    @property
    def function(self) -> Function:
        return self.match.function

    @property
    def upstream_name(self) -> str:
        module = self.match.upstream.path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        return f"{module}.{self.match.upstream.qualname}"


@dataclass(frozen=True)
class Census:
    root: Path
    source: Source
    pin: str | None
    releases: tuple[str, ...]
    copies: tuple[Copy, ...]
    files: int  # tree files parsed
    functions: int  # tree functions
    compared: int  # tree functions big enough to be compared (MIN_MATCHED statements or more)
    upstream_files: int  # files the index read
    skipped: tuple[Skipped, ...]
    seconds: dict[str, float]
    renamed: bool = False  # whether functions were also compared with upstream functions of other names


def run(
    root: Path,
    source: Source,
    pin: str | None,
    releases: Sequence[str],
    read: ReleaseReader | None,
    progress: Progress = no_progress,
    *,
    renamed: bool = False,
) -> Census:
    """The census of ``root``: index ``source``, match every tree function, date each copy across ``releases``.

    ``renamed``: a function no same-named upstream function matches is compared with every upstream
    function (slower: every upstream function is reduced).
    """
    clock = time.monotonic()
    skipped: list[Skipped] = []
    upstream_names = None if renamed else defined_names(source.files)
    tree_functions, files = read_functions(
        root, skipped, (lambda _: True) if upstream_names is None else upstream_names.__contains__
    )
    names = {f.name for f in tree_functions if f.size >= MIN_MATCHED}
    seconds = {"tree": time.monotonic() - clock}
    progress(f"read {len(tree_functions)} functions in {root}; indexing vLLM's in {source.where}")
    clock = time.monotonic()
    index = UpstreamIndex(source, None if renamed else names)
    seconds["index"] = time.monotonic() - clock
    clock = time.monotonic()
    matches = [
        m
        for f in tree_functions
        if (m := match(f, index) or (match_renamed(f, index) if renamed else None)) is not None
    ]
    matches = outermost(matches)
    counts = len(tree_functions), sum(f.size >= MIN_MATCHED for f in tree_functions)
    upstream_files = index.files
    del index, tree_functions
    seconds["match"] = time.monotonic() - clock
    clock = time.monotonic()
    paths = sorted({m.upstream.path for m in matches})
    texts: dict[str, dict[str, str | None]] = {p: {} for p in paths}
    if read is not None and paths:
        progress(f"{len(matches)} copies in {len(paths)} upstream files: reading them at {len(releases)} releases")
        same: dict[str, str] = {}  # one string per content: releases often ship the same file
        for tag in releases:
            for path, text in read(tag, paths).items():
                if path in texts:
                    texts[path][tag] = None if text is None else same.setdefault(text, text)
    seconds["releases"] = time.monotonic() - clock
    clock = time.monotonic()
    dated: list[Dated | None] = [None] * len(matches)
    if read is not None:
        _restore_nodes(root, [m.function for m in matches])
        dated = date_all([(m.function, m.upstream.path, m.upstream.qualname) for m in matches], texts, pin)
    copies = tuple(Copy(m, d) for m, d in zip(matches, dated, strict=True))
    seconds["dating"] = time.monotonic() - clock
    return Census(
        root,
        source,
        pin,
        tuple(releases),
        copies,
        files,
        counts[0],
        counts[1],
        upstream_files,
        tuple(skipped),
        seconds,
        renamed,
    )


def _restore_nodes(root: Path, copies: Sequence[Function]) -> None:
    """Give the copies their nodes back (their edits need statements with lines): their files parsed again."""
    by_path: dict[str, list[Function]] = defaultdict(list)
    for func in copies:
        by_path[func.path].append(func)
    for path, funcs in by_path.items():
        nodes = {
            (f.qualname, f.line): f.node for f in functions(parse_or_empty((root / path).read_bytes(), path), path)
        }
        for func in funcs:
            func.node = nodes.get((func.qualname, func.line))
            if func.node is None:
                raise UsageError(f"{root / path} changed while the census read it: run it again")

"""A census as text (a table and a summary line) and as JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from generator.judge import provenance
from generator.judge.census.dating import Dated
from generator.judge.census.reading import MIN_MATCHED, MIN_SHARE
from generator.judge.census.survey import Census, Copy

_HEADERS = ("function", "file:line", "upstream", "closest", "stale by", "differing")


def closest(dated: Dated) -> str:
    """The closest release, and the releases with the same upstream function when there are more."""
    if len(dated.same) == 1:
        return dated.tag
    first, last = dated.scanned.index(dated.same[0]), dated.scanned.index(dated.same[-1])
    if last - first + 1 == len(dated.same):
        return f"{dated.tag} (same in {dated.same[0]}..{dated.same[-1]})"
    return f"{dated.tag} (same in {len(dated.same)} of {dated.same[0]}..{dated.same[-1]})"


def _row(copy: Copy) -> tuple[str, ...]:
    where = f"{copy.function.path}:{copy.function.line}"
    dated = copy.dated
    if dated is None:
        nearest, stale, differing = "-", "-", str(copy.match.comparison.differing)
    else:
        nearest = closest(dated)
        stale = "?" if dated.stale is None else str(dated.stale)
        differing = str(dated.differing)
    return (copy.function.qualname, where, copy.upstream_name, nearest, stale, differing)


def text_lines(census: Census, show_edits: bool = False) -> list[str]:
    rows = [_HEADERS, *(_row(c) for c in census.copies)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADERS))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if show_edits:
        for copy in census.copies:
            dated = copy.dated
            if dated is None or dated.exact:
                continue
            out.append("")
            out.append(f"{copy.function.path}:{copy.function.line} {copy.function.qualname} against {dated.tag}:")
            out += [f"  {edit.describe(dated.tag)}" for edit in dated.edits]
    out.append("")
    out.append(summary(census))
    return out


def summary(census: Census) -> str:
    n = len(census.copies)
    names = "any name" if census.renamed else "the same name"
    version = f"vLLM {census.source.version}" if census.source.version else "vLLM (version unknown)"
    paths = len({c.match.upstream.path for c in census.copies})
    span = (
        f"{census.releases[0]}..{census.releases[-1]} ({len(census.releases)}) for {paths} upstream files"
        if census.releases
        else "none"
    )
    took = ", ".join(f"{k} {v:.1f}" for k, v in census.seconds.items())
    skipped = f", {len(census.skipped)} skipped (see --format json)" if census.skipped else ""
    return (
        f"{n} cop{'ies' if n != 1 else 'y'} of vLLM functions in {census.root} ({names}; {MIN_MATCHED}+ statements "
        f"and {MIN_SHARE:.0%}+ of the longer function's in common, in order): {census.files} files{skipped}, "
        f"{census.functions} functions, {census.compared} of {MIN_MATCHED}+ statements compared; "
        f"index: {version} at {census.source.where} ({census.upstream_files} files); releases: {span}; "
        f"pin: {census.pin or 'none'}; {sum(census.seconds.values()):.1f} s ({took})"
    )


def _edit_json(edit: provenance.Edit, tag: str) -> dict[str, Any]:
    def lines(run: Sequence[provenance.Statement]) -> list[int] | None:
        return [min(s.first for s in run), max(s.last for s in run)] if run else None

    return {
        "copy_lines": lines(edit.copy),
        "upstream_lines": lines(edit.upstream),
        "statements": edit.statements,
        "describe": edit.describe(tag),
    }


def to_json(census: Census) -> dict[str, Any]:
    copies = []
    for copy in census.copies:
        m, dated = copy.match, copy.dated
        entry: dict[str, Any] = {
            "function": copy.function.qualname,
            "renamed": copy.function.name != m.upstream.name,
            "path": copy.function.path,
            "line": copy.function.line,
            "statements": copy.function.size,
            "upstream": {
                "name": copy.upstream_name,
                "path": m.upstream.path,
                "qualname": m.upstream.qualname,
                "line": m.upstream.line,
                "statements": m.upstream.size,
                "matched": m.comparison.matched,
                "differing": m.comparison.differing,
            },
            "alternatives": [
                {"path": f.path, "qualname": f.qualname, "line": f.line, "differing": n} for f, n in m.alternatives
            ],
            "closest": None,
        }
        if dated is not None:
            entry["closest"] = {
                "tag": dated.tag,
                "differing": dated.differing,
                "same_upstream_in": list(dated.same),
                "stale": dated.stale,
                "edits": [_edit_json(e, dated.tag) for e in dated.edits],
                "scanned": list(dated.scanned),
            }
        copies.append(entry)
    return {
        "root": str(census.root),
        "pin": census.pin,
        "index": {"package": census.source.where, "origin": census.source.origin, "version": census.source.version},
        "thresholds": {"min_matched": MIN_MATCHED, "min_share": MIN_SHARE},
        "renamed": census.renamed,
        "releases": list(census.releases),
        "files": census.files,
        "functions": census.functions,
        "compared": census.compared,
        "upstream_files": census.upstream_files,
        "skipped": [{"path": s.path, "reason": s.reason} for s in census.skipped],
        "seconds": {k: round(v, 2) for k, v in census.seconds.items()},
        "copies": copies,
    }


def to_json_text(census: Census) -> str:
    return json.dumps(to_json(census), indent=2) + "\n"

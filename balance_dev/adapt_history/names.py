"""Moved vLLM names: which paths a new version of a file spells where the old one spelled another.

A *rewrite* in one file is a path the old text spells and the new does not, paired with a path the
new text spells, of the same kind, ending in the same name (the same last component at least), under
another module: one the new text added first, then the longest common ending. The new path may be
one the old text spelled already, in the other branch of a version guard that the new text dropped. The maintainers'
rewrites (P_A -> P_B) count only where the old path is gone at B and the new one is defined there
(``refs.defines``): a moved name, not a refactoring; one whose old path A did not define either
(the tree tracked vLLM's main branch between releases) is counted apart, since no release moved it.
``adapt``'s rewrites (P_A -> adapt's tree) are all counted, and the two are compared file by file.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from balance_dev.adapt_history.refs import Files, Ref, defines, refs


@dataclass(frozen=True, order=True)
class Rewrite:
    file: str
    kind: str
    old: str
    new: str


def _ending(a: str, b: str) -> int:
    x, y = a.split("."), b.split(".")
    n = 0
    while n < min(len(x), len(y)) and x[-1 - n] == y[-1 - n]:
        n += 1
    return n


def rewrites(file: str, old: set[Ref], new: set[Ref]) -> list[Rewrite]:
    """Each path ``old`` spelled and ``new`` does not, with the path ``new`` spells for it under another module.

    The new path may be one the old text spelled too (a version guard's other branch, now the only one):
    a path the new text added is preferred, then the longest common ending, then the first in order.
    """
    out: list[Rewrite] = []
    for ref in sorted(old - new):
        scored = [
            (c not in old, _ending(ref.path, c.path), c)
            for c in sorted(new)
            if c.kind == ref.kind
            and 1 <= _ending(ref.path, c.path) < min(len(ref.path.split(".")), len(c.path.split(".")))
        ]
        if scored:
            best = max(scored, key=lambda s: (s[0], s[1]))
            chosen = min(c for added, n, c in scored if (added, n) == best[:2])
            out.append(Rewrite(file, ref.kind, ref.path, chosen.path))
    return out


def parse_refs(text: str | None) -> set[Ref] | None:
    if text is None:
        return None
    try:
        return refs(ast.parse(text))
    except (SyntaxError, ValueError):
        return None


@dataclass(frozen=True)
class NameRow:
    """One moved name the maintainers rewrote, or one ``adapt`` rewrote: what the other side did."""

    file: str
    kind: str
    old: str
    maintainers: str | None  # P_B's path for it (None: P_B did not rewrite it)
    adapt: str | None  # adapt's path for it (None: adapt did not rewrite it)
    # P_B's rewrites: same | adapt-other | adapt-left, or not-at-a (A had no such path either). adapt's alone:
    # maintainers-spell-it (P_B spells the new path, but the old one is not gone at B), maintainers-kept,
    # maintainers-dropped, file-gone.
    outcome: str

    def as_json(self) -> dict[str, str | None]:
        return {
            "file": self.file,
            "kind": self.kind,
            "old": self.old,
            "maintainers": self.maintainers,
            "adapt": self.adapt,
            "outcome": self.outcome,
        }


def compare(
    files: Iterable[str],
    p_a: Mapping[str, str | None],
    p_b: Mapping[str, str | None],
    adapted: Mapping[str, str | None],
    at_a: Files,
    at_b: Files,
) -> list[NameRow]:
    """Every moved name P_B rewrote and every name adapt rewrote, file by file, with the other side's path."""
    rows: list[NameRow] = []
    for file in sorted(files):
        old = parse_refs(p_a.get(file))
        if old is None:
            continue
        theirs_refs, ours_refs = parse_refs(p_b.get(file)), parse_refs(adapted.get(file))
        theirs = {
            (r.kind, r.old): r.new
            for r in (rewrites(file, old, theirs_refs) if theirs_refs is not None else [])
            if not defines(r.old, at_b) and defines(r.new, at_b)
        }
        ours = {(r.kind, r.old): r.new for r in (rewrites(file, old, ours_refs) if ours_refs is not None else [])}
        for (kind, path), new in sorted(theirs.items()):
            mine = ours.get((kind, path))
            if not defines(path, at_a):
                outcome = "not-at-a"
            elif mine == new:
                outcome = "same"
            elif mine is not None:
                outcome = "adapt-other"
            else:
                outcome = "adapt-left"
            rows.append(NameRow(file, kind, path, new, mine, outcome))
        for (kind, path), mine in sorted(ours.items()):
            if (kind, path) in theirs:
                continue
            if theirs_refs is None:
                outcome = "file-gone"
            elif Ref(kind, path) in theirs_refs:
                outcome = "maintainers-kept"
            elif Ref(kind, mine) in theirs_refs:
                outcome = "maintainers-spell-it"
            else:
                outcome = "maintainers-dropped"
            rows.append(NameRow(file, kind, path, None, mine, outcome))
    return rows


MAINTAINERS = ("same", "adapt-other", "adapt-left")
ADAPT_ONLY = ("maintainers-spell-it", "maintainers-kept", "maintainers-dropped", "file-gone")


def counts(rows: Iterable[NameRow]) -> dict[str, Any]:
    """The table's figures: P_B's moved names and what adapt wrote for each; adapt's other rewrites."""
    rows = list(rows)
    by = Counter(r.outcome for r in rows)
    return {
        "maintainers_rewrote": sum(by[k] for k in MAINTAINERS),
        **{k.replace("-", "_"): by[k] for k in MAINTAINERS},
        "not_at_a": by["not-at-a"],
        "adapt_rewrote": sum(1 for r in rows if r.adapt is not None),
        "adapt_only": {k: by[k] for k in ADAPT_ONLY},
    }

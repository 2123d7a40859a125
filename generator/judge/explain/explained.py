"""A plugin's failing tests named by what the bump did: the attribution of one run (and, when given, the same run
at A) against ``impact``'s judgement of the tree between A and B, grouped for a reader.

The input is ``impact``'s JSON document (the contract the harness and every other reader use) and the runs;
the output is each failure's couplings (``attribute``) and the groups: one error and the couplings it hit,
with how many tests, the strongest verdict first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator.judge.explain import attribute, classes, scopes
from generator.judge.explain.attribute import Attributed, Coupling, Hit
from generator.judge.explain.outcomes import BAD, Outcome, SuiteRun, bump_failures

RANKS = ("breaks", "review", "info", "unjudged", "nothing")


class Attribution:
    """The couplings of ``impact``'s document that can explain a failure, with their scopes read from the tree,
    and the tree's classes by the vLLM bases they derive from: what naming a failure reads, read once."""

    def __init__(self, tree: Path, impact: Mapping[str, Any]) -> None:
        raw = impact["couplings"]
        site_scopes = {str(c["site"]): scopes.scope_of(tree, str(c["kind"]), str(c["site"])) for c in raw}
        self.couplings: list[Coupling] = attribute.couplings_of(impact, site_scopes, raw)
        self.bases = attribute.class_bases(site_scopes, raw)
        files = (p.relative_to(tree).as_posix() for p in sorted(tree.rglob("*.py")) if ".git" not in p.parts)
        for name, found in classes.read(tree, files).items():
            self.bases.setdefault(name, set()).update(found)

    def attribute(self, failures: Sequence[Outcome]) -> list[Attributed]:
        return attribute.attribute(failures, self.couplings, self.bases)


@dataclass(frozen=True)
class Group:
    """Failing tests alike: one error, the couplings it hit; how many tests, and which."""

    error: str
    hits: tuple[Hit, ...]
    tests: tuple[str, ...]

    @property
    def verdict(self) -> str:
        found = {hit.verdict for hit in self.hits}
        return next((v for v in RANKS[:3] if v in found), "unjudged" if self.hits else "nothing")


@dataclass
class Explained:
    old: str
    new: str
    attributed: list[Attributed]
    theirs: list[Outcome] = field(default_factory=list)  # failing at A too: the tree's own, not the bump's
    strangers: list[str] = field(default_factory=list)  # test ids read whose module the tree lacks
    failures: int = 0

    def groups(self) -> list[Group]:
        """The failures by (error, couplings), the strongest verdict first, then the most tests."""
        found: dict[tuple[str, tuple[Hit, ...]], list[str]] = {}
        for a in self.attributed:
            found.setdefault((a.error, a.hits), []).append(a.test)
        made = [Group(error, hits, tuple(sorted(tests))) for (error, hits), tests in found.items()]
        return sorted(
            made,
            key=lambda g: (RANKS.index(g.verdict), -len(g.tests), g.error, [(h.site, h.upstream) for h in g.hits]),
        )

    def by_verdict(self) -> dict[str, int]:
        count = Counter(a.verdict for a in self.attributed)
        return {v: count.get(v, 0) for v in RANKS}


def failing(at_to: SuiteRun, at_from: SuiteRun | None) -> tuple[list[Outcome], list[Outcome]]:
    """The bump's failures and the tree's own: with the run at A, a test failing there too is the tree's (and one
    passing at A that fails at B, or whose module no longer collects, the bump's); without it, every failure of
    the run is the bump's to explain."""
    if at_from is not None:
        theirs = [o for _, o in sorted(at_from.tests.items()) if o.outcome in BAD]
        return bump_failures(at_from, at_to), theirs
    bad = [o for _, o in sorted(at_to.tests.items()) if o.outcome in BAD]
    return bad + [o for _, o in sorted(at_to.collect_errors.items())], []


def explain(
    tree: Path,
    impact: Mapping[str, Any],
    at_to: SuiteRun,
    at_from: SuiteRun | None = None,
    strangers: Sequence[str] = (),
) -> Explained:
    failures, theirs = failing(at_to, at_from)
    attributed = Attribution(tree, impact).attribute(failures)
    return Explained(str(impact["from"]), str(impact["to"]), attributed, theirs, list(strangers), len(failures))

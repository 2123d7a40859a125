"""A plugin's failing tests named by what the bump did: the attribution of one run (and, when given, the same run
at A) against ``impact``'s judgement of the tree between A and B, grouped for a reader.

The input is ``impact``'s JSON document (the contract the harness and every other reader use) and the runs;
the output is each failure's couplings (``attribute``) and the groups: one error and the couplings it hit,
with how many tests, the strongest verdict first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator.judge.explain import attribute, classes, scopes
from generator.judge.explain.attribute import Attributed, Coupling, Hit
from generator.judge.explain.outcomes import BAD, Outcome, SuiteRun, bump_failures

RANKS = ("breaks", "review", "info", "unjudged", "nothing")


class Attribution:
    """The couplings of ``impact``'s document that can explain a failure, with their scopes read from the tree,
    and the tree's classes by the vLLM bases they derive from: what naming a failure reads, read when first
    needed. A scope is read from the tree only for a file a failure touches (a frame's, its test's, where a
    stand-in was imported), and for the overrides a call rule or a class rule asks about."""

    def __init__(self, tree: Path, impact: Mapping[str, Any]) -> None:
        self.tree, self.impact = tree, impact
        self.raw: list[Mapping[str, Any]] = list(impact["couplings"])
        self._scopes: dict[str, scopes.Scope] = {}
        self._outlines = scopes.outlines(tree)
        self.bases: dict[str, set[tuple[str, str]]] = {}
        self._read: set[str] = set()  # the class names whose tree bases were read
        self._texts: dict[str, str] = {}

    @property
    def couplings(self) -> list[Coupling]:
        """Every coupling that can explain a failure, each with its scope (all read: for a report of them all)."""
        self._scope_for(c for c in self.raw if c["status"] != "unchanged")
        return attribute.couplings_of(self.impact, self._scopes, self.raw)

    def attribute(self, failures: Sequence[Outcome]) -> list[Attributed]:
        failures = list(failures)
        files = attribute.files_touched(failures)
        # the methods a refused call names (``Cls.f() got an unexpected keyword``): the overrides of that name
        called = {m[1].rpartition(".")[2] for f in failures if (m := attribute.CALL.match(f.error))}
        named = attribute.classes_named(failures)

        def asked(c: Mapping[str, Any]) -> bool:
            last = str(c["upstream"]).rpartition(".")[2]
            if c["status"] != "unchanged" and str(c["site"]).rpartition(":")[0] in files:
                return True
            if c["kind"] == "override" and (last in called or (named and self._may_hold(str(c["site"]), named))):
                return True  # an override's scope names its class and method: what the call and class rules read
            return bool(c.get("receiver")) and str(c["receiver"]).rpartition(".")[2] in called

        self._scope_for(c for c in self.raw if asked(c))
        self._with_classes(named)
        couplings = attribute.couplings_of(self.impact, self._scopes, self.raw)
        return attribute.attribute(failures, couplings, self.bases)

    def _scope_for(self, raw: Iterable[Mapping[str, Any]]) -> None:
        for c in raw:
            site = str(c["site"])
            if site not in self._scopes:
                self._scopes[site] = scopes.scope_of(self._outlines, str(c["kind"]), site)
        self._outlines.save()

    def _may_hold(self, site: str, names: set[str]) -> bool:
        """The site's file defines one of the classes (by its text, before anything is parsed)."""
        path = site.rpartition(":")[0]
        if path not in self._texts:
            try:
                self._texts[path] = (self.tree / path).read_text("utf-8")
            except (OSError, UnicodeDecodeError):
                self._texts[path] = ""
        return any(f"class {n}" in self._texts[path] for n in names)

    def _with_classes(self, names: set[str]) -> None:
        """The vLLM bases of the tree's classes errors name: from the overrides' scopes, and from the tree's
        source (read when first asked)."""
        for name, found in attribute.class_bases(self._scopes, self.raw).items():
            self.bases.setdefault(name, set()).update(found)
        names = names - self._read
        if not names:
            return
        self._read |= names
        tree = self.tree
        files = (p.relative_to(tree).as_posix() for p in sorted(tree.rglob("*.py")) if ".git" not in p.parts)
        for name, found in classes.read(tree, files, names).items():
            self.bases.setdefault(name, set()).update(found)


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

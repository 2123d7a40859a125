"""Each coupling's verdict: what the tree's code does with each name gathered (its calls, its overrides and what
its patches install, its classes and their objects, B's calls of them) and handed to ``verdicts.judge``, each
answer kept by what was asked (``judged``)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TypeVar

from generator.judge.couplings import inherited, verdicts
from generator.judge.couplings.b_calls import BCalls
from generator.judge.couplings.bindings import Exports, Ref, follow
from generator.judge.couplings.changes import Change
from generator.judge.couplings.instances import Use
from generator.judge.couplings.judged import Judged
from generator.judge.couplings.lineage import Lineage, tree_modules
from generator.judge.couplings.passing import Passes
from generator.judge.couplings.record import TEST_PATCHES, Coupling, Symbol
from generator.judge.couplings.signatures import Receiver
from generator.judge.couplings.sites import TreeClass
from generator.judge.couplings.tree_read import Tree
from generator.judge.couplings.upstream import Definition, Resolver

T = TypeVar("T")


def _vllm(ref: Ref, exports: Exports, modules: frozenset[str]) -> list[Ref]:
    return [r for r in follow(ref, exports, modules) if r.in_vllm]


def with_verdicts(
    tree: Tree,
    couplings: list[Coupling],
    symbols: dict[str, Symbol],
    a: Resolver,
    b: Resolver,
    memo: Judged | None = None,
    passes: dict[str, Passes] | None = None,
) -> list[Coupling]:
    """Each coupling with its verdict (``verdicts.judge``), given what the tree's code does with the name.

    ``passes``, when given, is filled with what B's own calls pass each definition an override or a patch's
    function stands in for, where B changed its signature (``BCalls.passes``: the same reading of B's calls)."""
    memo = memo or Judged(None, (), a, b)
    modules, exports = tree_modules(tree.scans)
    methods = {
        (cls.path, line): verdicts.Method(
            cls.signatures[name],
            cls.super_calls.get(name, ()),
            Receiver(
                f"{cls.qualname}.{name}",
                cls.path,
                line,
                cls.ends.get(name, line),
                cls.signatures[name],
                cls.kinds.get(name, "plain"),
            ),
        )
        for scan in tree.scans
        for cls in scan.classes
        for name, line in cls.methods.items()
        if name in cls.signatures
    }
    lineage = Lineage(tree.scans)
    subclasses, derived_in = lineage.subclasses(), lineage.derived_in()
    uses = lineage.uses(tree.scans)
    module_of = {scan.path: scan.module for scan in tree.scans}
    imported: dict[str, list[str]] = {}  # a file's import couplings' names, longest first (a call goes to the longest)
    for c in couplings:
        if c.kind == "import" and not c.why:
            imported.setdefault(c.path, []).append(c.upstream)
    refused: dict[tuple[str, str], list[tuple[int, str]]] = {}
    renamed: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for scan in tree.scans:
        names = sorted(set(imported.get(scan.path, [])), key=len, reverse=True)
        if not names:
            continue
        for site in scan.calls:
            for ref in _vllm(site.ref, exports, modules):
                owner = next((n for n in names if ref.path == n or ref.path.startswith(n + ".")), None)
                if owner is None:
                    continue
                call = (site.call, site.line, ref.path)
                why = memo.get("call", call, functools.partial(verdicts.refused_call, *call, a, b))
                if why:
                    refused.setdefault((scan.path, owner), []).append((site.line, why))
                elif why := memo.get("renamed", call, functools.partial(verdicts.renamed_argument, *call, a, b)):
                    renamed.setdefault((scan.path, owner), []).append((site.line, why))
    owners = {(cls.path, line): cls for scan in tree.scans for cls in scan.classes for line in cls.methods.values()}
    b_calls = BCalls(a, b, memo, functools.partial(replaced, lineage, b))
    for c in couplings:
        symbol = symbols.get(c.upstream)
        change = None if c.why or symbol is None else symbol.change_for(c.imports)
        method = methods.get((c.path, c.line)) if c.kind == "override" else None
        receiver = method.receiver if method is not None else c.installs
        if receiver is not None and change is not None and c.detail not in _MOCKS:
            b_calls.ask(c, change, receiver, owners.get((c.path, c.line)) if method is not None else None)
    if passes is not None:
        passes.update(b_calls.passes())
    out = []
    for c in couplings:
        symbol = symbols.get(c.upstream)
        change = None if c.why or symbol is None else symbol.change_for(c.imports)
        method = methods.get((c.path, c.line)) if c.kind == "override" else None
        # What verdicts.judge reads, besides the change (which the name and the way it is imported decide):
        asked = _Asked(
            c.kind,
            c.status,
            c.upstream,
            change is None,
            method,
            _below(c, subclasses, derived_in, module_of.get(c.path, "")),
            _uses_below(c, uses, module_of.get(c.path, "")),
            tuple(refused.get((c.path, c.upstream), [])) if c.kind == "import" else (),
            tuple(renamed.get((c.path, c.upstream), [])) if c.kind == "import" else (),
            c.detail in _MOCKS,
            c.imports,
            c.own,
            c.installs,
            b_calls.answer(c),
            b_calls.seen(c),
            c.path,
            c.detail in TEST_PATCHES,
            c.creates,
        )
        found = memo.get("verdict", asked, functools.partial(_verdict, asked, change, a, b))
        out.append(
            replace(
                c,
                verdict=found.verdict,
                rule=found.rule,
                reason=found.reason,
                at_line=found.line,
                at_path=found.path,
                at_end=found.end,
                receiver=found.receiver,
            )
        )
    return out


def replaced(lineage: Lineage, b: Resolver, cls: TreeClass) -> frozenset[tuple[str, str]]:
    """(B's class, method) that the tree's class (with the tree's classes between it and vLLM) replaces without
    calling B's (``super().<method>``): a call B's own code makes in that method never runs for its objects.
    B's class is each vLLM class above it at B, by its canonical name."""
    bases, between = lineage.of(cls)
    family = [cls, *(lineage.classes[k] for k in between if k in lineage.classes)]
    own = {name for c in family for name in c.methods if not c.super_calls.get(name)}
    out: set[tuple[str, str]] = set()
    for base in bases:
        found = b.resolve(base)
        if isinstance(found, Definition) and found.kind == "class":
            out.update((above.name, name) for above in inherited.lineage(b, found) for name in own)
    return frozenset(out)


_MOCKS = ("mock.patch", "mock.patch.object")  # a test's MagicMock in the name's place takes any call


def _below(
    c: Coupling, below: Mapping[str, Sequence[T]], derived_in: dict[str, frozenset[str]], module: str
) -> tuple[T, ...]:
    """What the tree has below the vLLM class an import brings in (its classes, what it does with their objects),
    when the importing file builds a class on it (what its class statement derives from is what B's changes of
    the class reach); () for any other import."""
    if c.kind != "import":
        return ()
    for name in (c.upstream, c.name):
        if name and module in derived_in.get(name, ()):
            return tuple(below.get(name, ()))
    return ()


def _uses_below(c: Coupling, uses: Mapping[tuple[str, str], Sequence[Use]], module: str) -> tuple[Use, ...]:
    """What the tree does with objects of its classes built on the vLLM class an import brings in, when the
    importing file's class statement names it (``Lineage.uses``)."""
    if c.kind != "import":
        return ()
    for name in (c.upstream, c.name):
        if name and (found := uses.get((name, module))):
            return tuple(sorted(found))
    return ()


@dataclass(frozen=True)
class _Asked:
    """What ``verdicts.judge`` reads of one coupling besides its change: the key its verdict is kept by."""

    kind: str
    status: str
    upstream: str
    unjudged: bool  # no change known (unresolved)
    method: verdicts.Method | None
    subclasses: tuple[verdicts.Subclass, ...]
    uses: tuple[Use, ...]
    refused_calls: tuple[tuple[int, str], ...]
    renamed_calls: tuple[tuple[int, str], ...]
    mocked: bool
    imports: str
    own_binding: bool
    installs: Receiver | None
    b_call: tuple[str, str] | None
    b_seen: bool
    site_path: str
    test_patch: bool
    creates: bool


def _verdict(asked: _Asked, change: Change | None, a: Resolver, b: Resolver) -> verdicts.Verdict:
    more = {f.name: getattr(asked, f.name) for f in fields(asked)}
    for name in ("kind", "status", "upstream", "unjudged"):
        del more[name]
    return verdicts.judge(asked.kind, asked.status, asked.upstream, change, a, b, **more)

"""Every coupling of a tree to vLLM, each judged between two releases: what ``couplings`` and ``impact`` compute.

One pass over the tree parses each file once: ``sites`` reads its imports, patches and classes, and
``census`` reads its functions. Then, with release A's package (the pin, or ``--from``): copies are
the tree's functions that census matches against A's; overrides are the methods of the tree's
classes that a vLLM ancestor defines (at A or at B: a method B's base starts defining is overridden
from then on, silently); every name is resolved at A and at B (``upstream``) and judged
(``changes``). Names reached through the tree's own modules are followed there first. A name outside
vLLM is no coupling; a site that touches vLLM but cannot be named stays, as *unresolved*, with why.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import functools
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from generator.judge import provenance
from generator.judge.census import index as census_index
from generator.judge.census import matching, reading
from generator.judge.census.reading import Function, Skipped
from generator.judge.couplings import changes, sites, verdicts
from generator.judge.couplings.bindings import Exports, Ref, follow
from generator.judge.couplings.changes import Change, Mover
from generator.judge.couplings.gating import dead_gates, gate_helpers, gated
from generator.judge.couplings.judged import Judged
from generator.judge.couplings.judging import with_verdicts
from generator.judge.couplings.lineage import Lineage, nearest, tree_modules
from generator.judge.couplings.passing import Passes
from generator.judge.couplings.record import TEST_PATCHES, Coupling, Symbol, is_test
from generator.judge.couplings.registry import Declared
from generator.judge.couplings.signatures import Receiver
from generator.judge.couplings.tree_read import Tree, read_tree
from generator.judge.couplings.upstream import Resolver
from generator.sources.base import Progress, no_progress
from generator.sources.package import Package

KINDS = ("copy", "patch", "override", "import", "declared")
__all__ = ["KINDS", "Coupling", "Impact", "Symbol", "found", "is_test", "judge", "overrides", "run", "with_verdicts"]


@dataclass
class Impact:
    root: Path
    old: str  # release A's label
    new: str  # release B's label
    couplings: list[Coupling]
    symbols: dict[str, Symbol]
    files: int  # files of the tree parsed
    skipped: list[Skipped]
    registry: str | None  # the registry file read, if any
    seconds: dict[str, float] = field(default_factory=dict)
    newer: list[Skipped] = field(default_factory=list)  # files read with a newer Python's syntax, and what it is
    # The tree's own version gates (judge/gates.py): its helpers (dotted path -> how each compares), the files
    # that gate on them, and the gates already dead at A (each gate's line and the release it names).
    helpers: dict[str, str] = field(default_factory=dict)
    gated_files: tuple[str, ...] = ()
    dead_gates: tuple[tuple[str, int, str], ...] = ()
    # What B's own calls pass each definition an override or a patch's function stands in for, where B changed
    # its signature, by B's canonical name (``passing.Passes``): what ``adapt`` gives the tree's function.
    passes: dict[str, Passes] = field(default_factory=dict)

    def verdicts(self) -> dict[str, int]:
        out = dict.fromkeys(verdicts.VERDICTS, 0)
        for coupling in self.couplings:
            out[coupling.verdict] += 1
        return out

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(changes.STATUSES, 0)
        for coupling in self.couplings:
            out[coupling.status] += 1
        return out


_Tree = Tree  # what the passes below read: the tree's files, each read once (tree_read)


def _vllm(ref: Ref, exports: Exports, modules: frozenset[str]) -> list[Ref]:
    return [r for r in follow(ref, exports, modules) if r.in_vllm]


def found(
    tree: _Tree,
    index: census_index.UpstreamIndex,
    declared: Sequence[Declared],
    progress: Progress = no_progress,
    memo: Judged | None = None,
) -> list[Coupling]:
    """The couplings the tree makes, before any is judged (overrides come with judging: they need B too).
    ``memo``: where the tree's copies are kept, by what was matched (the functions that could be copies)."""
    modules, exports = tree_modules(tree.scans)
    functions = {scan.module.removeprefix("src."): scan.functions for scan in tree.scans}
    lineage = Lineage(tree.scans)
    out: list[Coupling] = []
    for scan in tree.scans:
        for site in scan.sites:
            installs = site.installs or _installed(site, exports, modules, functions)
            for ref in _vllm(site.ref, exports, modules) if site.kind != "unresolved" else [site.ref]:
                if site.kind == "unresolved" and not ref.in_vllm:
                    break
                kind = "import" if site.kind == "import" or "star import" in site.why else "patch"
                written = site.kind == "import" and ref == site.ref  # not through the tree's own modules
                imports = site.module if written and Ref(site.module).in_vllm else ""
                # A patch of a name the tree's own module binds (``mock.patch("plugin.worker.f")``): it rebinds
                # the tree's name, which the tree's import of ``f`` binds.
                own = kind == "patch" and not site.ref.in_vllm and site.ref.path.rpartition(".")[0] in modules
                out.append(
                    Coupling(
                        kind,
                        scan.path,
                        site.line,
                        ref.path,
                        site.detail,
                        site.why,
                        imports=imports,
                        own=own,
                        installs=installs if kind == "patch" else None,
                        creates=site.creates,
                    )
                )
            if site.kind == "patch" and site.detail in TEST_PATCHES and not site.creates:
                out += _inherited_member(site, scan.path, lineage)
    label = index.source.files.label
    # Only a function named as one of A's and big enough can be a copy: what is matched, and kept by it
    asked = [f for f in tree.functions if f.size >= matching.MIN_MATCHED and f.name in index.by_name]
    key = hashlib.sha256(repr([(f.path, f.line, f.qualname, f.keys) for f in asked]).encode()).hexdigest()
    copies = memo.get("copies", key, functools.partial(_copies, asked, index)) if memo else _copies(asked, index)
    progress(f"{len(copies)} copies of vLLM {label}'s functions among {len(tree.functions)}")
    out += [Coupling("copy", path, line, upstream, detail) for path, line, upstream, detail in copies]
    out += [Coupling("declared", d.path, d.line, d.symbol, f"entry {d.entry}" if d.entry else "") for d in declared]
    return out


def _copies(functions: Sequence[Function], index: census_index.UpstreamIndex) -> tuple[tuple[str, int, str, str], ...]:
    """The functions that are copies of A's (census's match, the outermost of nested ones): where, of what, how far."""
    matches = matching.outermost([m for f in functions if (m := matching.match(f, index)) is not None])
    label = index.source.files.label
    out = []
    for m in matches:
        module = m.upstream.path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        detail = f"{m.comparison.differing} statements differ from vLLM {label}'s"
        out.append((m.function.path, m.function.line, f"{module}.{m.upstream.qualname}", detail))
    return tuple(out)


def _inherited_member(site: sites.Site, path: str, lineage: Lineage) -> list[Coupling]:
    """A test's patch of a member of the tree's own class that the tree's classes do not bind: it patches what
    the class inherits from vLLM (``patch.object(NPUPlatform, "_find_non_ssm_backend")``), and raises when B's
    base no longer has it. The coupling is the vLLM base's member, for each vLLM base the class derives from."""
    owner, _, member = site.ref.path.rpartition(".")
    cls = lineage.class_of(Ref(owner)) if owner and not site.ref.in_vllm else None
    if cls is None:
        return []
    family = lineage.family(cls)
    if member in family.binds or member in family.assigns:
        return []
    bases = lineage.of(cls)[0]
    return [Coupling("patch", path, site.line, f"{base}.{member}", site.detail) for base in bases[:1]]


def _installed(
    site: sites.Site, exports: Exports, modules: frozenset[str], functions: dict[str, dict[str, Receiver]]
) -> Receiver | None:
    """What a patch installs when it is a function another module of the tree defines (``installs_from``)."""
    if site.installs_from is None:
        return None
    for ref in follow(site.installs_from, exports, modules):
        module, _, name = ref.path.rpartition(".")
        if (found := functions.get(module, {}).get(name)) is not None:
            return replace(found, kind=site.installs_kind or "plain")
    return None


def overrides(tree: _Tree, a: Resolver, b: Resolver, memo: Judged | None = None) -> list[Coupling]:
    """Methods of the tree's classes that a vLLM ancestor class defines, at A or at B."""
    memo = memo or Judged(None, (), a, b)
    lineage = Lineage(tree.scans)

    def ancestors(cls: sites.TreeClass) -> list[str]:
        return lineage.of(cls)[0]

    out: list[Coupling] = []
    for scan in tree.scans:
        for cls in scan.classes:
            bases = ancestors(cls)
            if not bases:
                continue
            for method, line in cls.methods.items():
                defining = [
                    base
                    for base in bases
                    if memo.get("defines", (base, method), functools.partial(_defines, a, b, base, method))
                ]
                if defining:
                    base = nearest(defining, a, b, memo)
                    detail = f"{cls.qualname}.{method} overrides it"
                    out.append(Coupling("override", scan.path, line, f"{base}.{method}", detail))
    return out


def _defines(a: Resolver, b: Resolver, base: str, method: str) -> bool:
    return (a.defines(base, method) or b.defines(base, method)) is not None


def judge(
    tree: _Tree,
    couplings: list[Coupling],
    a: Resolver,
    b: Resolver,
    commits: Callable[[Change], tuple[tuple[str, str], ...] | None] | None = None,
    memo: Judged | None = None,
) -> tuple[list[Coupling], dict[str, Symbol]]:
    """Each coupling with its status, and each vLLM name (as the tree reaches it) judged once.

    Names, not definitions, are the unit: two paths to one definition at A can part at B (one re-export
    dropped, a subclass now defining the member its base did), and each says what became of it. An import
    statement's module must be a file of the release: one that is at A and is not at B is gone there
    (``Resolver.imported``), though a package's ``__getattr__`` may serve the same name as an attribute.
    """
    memo = memo or Judged(None, (), a, b)
    mover = Mover(b)
    symbols: dict[str, Symbol] = {}
    history: dict[tuple[str | None, str | None], tuple[tuple[str, str], ...] | None] = {}
    ways: dict[str, dict[str, None]] = {}  # a name -> the ways couplings reach it (Coupling.imports)
    for c in couplings:
        if not c.why:
            ways.setdefault(c.upstream, {})[c.imports] = None
    for upstream, used in ways.items():
        asked = (upstream, tuple(used))
        change, others = memo.get("symbol", asked, functools.partial(_ways, *asked, a, b, mover))
        found_commits = None
        if commits is not None and change.status != changes.UNCHANGED:
            key = (change.old.name if change.old else None, change.new.name if change.new else None)
            if key not in history:
                history[key] = commits(change)
            found_commits = history[key]
        symbols[upstream] = Symbol(upstream, change, found_commits, others)
    judged = []
    copies = {(f.path, f.line): f for f in tree.functions}
    for coupling in couplings:
        if coupling.why:
            judged.append(replace(coupling, status=changes.UNRESOLVED))
            continue
        change = symbols[coupling.upstream].change_for(coupling.imports)
        definition = change.old or change.new
        named = replace(coupling, status=change.status, name=definition.name if definition else coupling.upstream)
        if coupling.kind == "copy" and (function := copies.get((coupling.path, coupling.line))) is not None:
            copied = (coupling.upstream, coupling.imports, function.size, function.keys)
            status, overlap = memo.get("copy", copied, functools.partial(_copy_status, function, change))
            named = replace(named, status=status or named.status, overlap=overlap)
        judged.append(named)
    return judged, symbols


def _ways(
    upstream: str, used: tuple[str, ...], a: Resolver, b: Resolver, mover: Mover
) -> tuple[Change, tuple[tuple[str, Change], ...]]:
    """What became of ``upstream``, and how each other way the tree reaches it (an import's module) sees it."""
    plain = changes.judge(upstream, a.resolve(upstream), b.resolve(upstream), a, b, mover)
    seen: dict[str, Change] = {}
    for module in used:
        missing = (a.missing(module), b.missing(module)) if module else (None, None)
        if (missing[0] is None) == (missing[1] is None):  # a file at both, or at neither (absent as today)
            seen[module] = plain
        else:
            seen[module] = changes.judge(
                upstream, a.imported(upstream, module), b.imported(upstream, module), a, b, mover
            )
    change = next((c for c in seen.values() if c is not plain), plain)
    return change, tuple((m, c) for m, c in seen.items() if c is not change)


def _copy_status(function: Function, change: Change) -> tuple[str, tuple[str, ...]]:
    """A copy equal to B's function is redundant (its status; "": the change's); else the statements both it
    and upstream changed."""
    old, new = change.old, change.new
    if new is None or not isinstance(new.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "", ()
    theirs = reading.statement_keys(new.node)
    if function.size >= reading.MIN_MATCHED and function.keys == theirs:
        return changes.REDUNDANT, ()
    if old is None or change.status == changes.UNCHANGED or not isinstance(old.node, ast.FunctionDef):
        return "", ()
    return "", _overlap(function.keys, old.node, theirs)


def _overlap(copy: tuple[int, ...], old: ast.FunctionDef, new: tuple[int, ...]) -> tuple[str, ...]:
    """A's statements that upstream changed (A to B) and the copy's own edits touch too."""
    method = provenance.reduce(old)
    base = method.keys

    def touched(other: Sequence[int]) -> set[int]:
        spots: set[int] = set()
        ops = difflib.SequenceMatcher(None, base, other, autojunk=False).get_opcodes()
        for op, i1, i2, _, _ in ops:
            if op != "equal":
                spots.update(range(i1, i2) if i2 > i1 else (i1 - 1, i1))  # an insertion touches its neighbours
        return {i for i in spots if 0 <= i < len(base)}

    both = sorted(touched(copy) & touched(new))
    return tuple(f"line {method.statements[i].first}: {method.statements[i].code}" for i in both)


def _own_code(coupling: Coupling) -> bool:
    """Named statically, and the tree's own code (not a test's patch)."""
    return not coupling.why and not is_test(coupling.path) and coupling.detail not in TEST_PATCHES


def declarations(couplings: list[Coupling], symbols: dict[str, Symbol], has_registry: bool) -> list[Coupling]:
    """Patches the registry does not declare, declared symbols no code of the tree touches: marked as such.

    A declared symbol is touched by code that patches, overrides or copies it, one of its members (it is
    a module or class whose members are patched), or the class it belongs to (a class replaced whole).
    Only the tree's own code counts, not its tests.
    """
    if not has_registry:
        return couplings
    declared = {n for c in couplings if c.kind == "declared" for n in (c.upstream, c.name) if n}
    code = [c for c in couplings if c.kind in ("patch", "override", "copy") and _own_code(c)]
    in_code = {id(c) for c in code}

    kinds = {d.name: d.kind for s in symbols.values() for d in (s.change.old, s.change.new) if d is not None}

    def is_class(name: str) -> bool:
        return kinds.get(name) == "class"

    def touches(code_name: str, symbol: str) -> bool:
        return (
            code_name == symbol
            or code_name.startswith(symbol + ".")
            or (symbol.startswith(code_name + ".") and is_class(code_name))
        )

    names = {n for c in code for n in (c.upstream, c.name) if n}
    out = []
    for c in couplings:
        if c.kind == "declared":
            mine = {n for n in (c.upstream, c.name) if n}
            c = replace(c, touched=any(touches(n, s) for n in names for s in mine))
        elif id(c) in in_code and c.kind == "patch":
            theirs = {n for n in (c.upstream, c.name) if n}
            c = replace(c, declared=any(touches(n, d) or touches(d, n) for n in theirs for d in declared))
        out.append(c)
    return out


def _gated_files(root: Path, scans: Sequence[sites.FileScan], helpers: Mapping[str, str]) -> tuple[str, ...]:
    """The files that gate on a helper: an ``if``, a conditional expression, a ``skipif`` (their regions), or a
    value (``return x or vllm_version_is("0.28.0")``: retiring folds it too), found by the helper's name."""
    called = tuple(f"{h.rpartition('.')[2]}(" for h in helpers)
    out = set()
    for scan in scans:
        if scan.regions:
            out.add(scan.path)
        elif called:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                if any(c in (root / scan.path).read_text("utf-8") for c in called):
                    out.add(scan.path)
    return tuple(sorted(out))


def run(
    root: Path,
    old: Package,
    new: Package,
    *,
    paths: Sequence[Path] = (),
    declared: Sequence[Declared] = (),
    registry: str | None = None,
    commits: Callable[[Change], tuple[tuple[str, str], ...] | None] | None = None,
    progress: Progress = no_progress,
) -> Impact:
    """The impact of moving ``root``'s tree from ``old`` to ``new``."""
    seconds: dict[str, float] = {}
    clock = time.monotonic()
    index = census_index.UpstreamIndex(census_index.package_source(old))
    seconds["index"] = time.monotonic() - clock
    clock = time.monotonic()
    tree = read_tree(root, paths, old.label, set(index.by_name), progress)
    seconds["tree"] = time.monotonic() - clock
    clock = time.monotonic()
    a, b = Resolver(old), Resolver(new)
    memo = Judged(root, paths, a, b)
    couplings = found(tree, index, declared, progress, memo)
    seconds["copies"] = time.monotonic() - clock
    clock = time.monotonic()
    couplings += overrides(tree, a, b, memo)
    seconds["overrides"] = time.monotonic() - clock
    clock = time.monotonic()
    couplings, symbols = judge(tree, couplings, a, b, commits, memo)
    couplings = declarations(couplings, symbols, registry is not None or bool(declared))
    passes: dict[str, Passes] = {}
    couplings = with_verdicts(tree, couplings, symbols, a, b, memo, passes)
    couplings = gated(tree.scans, couplings, new.label)
    couplings.sort(key=lambda c: (c.path, c.line, KINDS.index(c.kind), c.upstream))
    memo.save()
    progress(f"{memo.hits} judgements from the cache")
    seconds["resolve and compare"] = time.monotonic() - clock
    newer = [Skipped(scan.path, scan.syntax) for scan in tree.scans if scan.syntax]
    made = Impact(root, old.label, new.label, couplings, symbols, tree.files, tree.skipped, registry, seconds, newer)
    made.helpers = {k: v for k, v in gate_helpers(tree.scans).items() if not k.startswith("?")}
    made.gated_files = _gated_files(root, tree.scans, made.helpers)
    made.dead_gates = dead_gates(tree.scans, made.helpers, old.label)
    made.passes = passes
    return made

"""What ``adapt`` would write into a tree, from ``impact``'s judgement of it between A and B.

The facts are impact's (``judge.couplings``): which names moved and where to, which copies'
upstream functions changed, were removed, or equal B's. This module only turns them into new file
texts (``copies`` first, then ``names``) and a list of what is left for a person. Nothing is
written here: the plan holds each file's bytes as read, so the writer can refuse a file that
changed on disk since.
"""

from __future__ import annotations

import ast
import copy
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from generator.judge.census import newer_syntax
from generator.judge.couplings import changes, inherited
from generator.judge.couplings.impact import Impact
from generator.judge.couplings.record import Coupling, is_test
from generator.judge.couplings.upstream import Definition, Resolver
from generator.judge.resync import Conflict, Merged, Redundant, Unchanged
from generator.sources.package import Package
from generator.tree.adapt import follow, imports, names, setups, signatures
from generator.tree.adapt.copies import CopyJob, CopyOutcome, function_text, resync_file
from generator.tree.adapt.retire import retire
from generator.tree.adapt.span import Span

PARTS = ("names", "copies", "gates", "signatures")


@dataclass(frozen=True)
class Leftover:
    """One thing ``adapt`` did not do, for a person: where, what, why, and upstream's diff when it helps."""

    site: str
    # conflict | removed | redundant | unchanged | signature | parameter | name | guarded | skipped | regenerated
    # | gate | unspanned
    kind: str
    upstream: str
    why: str
    detail: str = ""
    verdict: str = ""  # impact's for the coupling at that site (breaks | review | info), "" when it gives none

    @property
    def is_work(self) -> bool:
        """What ``adapt`` would have written and could not, or a name the tree uses that B lacks: a person's."""
        return self.kind in WORK


# The leftovers that make ``adapt`` exit 1 (docs/adapt.md, "Exit codes"): a copy not re-synced, a moved name
# not rewritten, a name gone, a parameter B's calls pass that the tree's function could not be given. The rest
# are reported for a person's judgement but need no edit to run at B.
WORK = ("conflict", "name", "regenerated", "parameter", "unspanned")


@dataclass
class Plan:
    old: str
    new: str
    read: dict[Path, bytes] = field(default_factory=dict)  # each file to change, as it was read
    write: dict[Path, bytes] = field(default_factory=dict)
    renamed: list[tuple[str, names.Rewrite]] = field(default_factory=list)
    merged: list[tuple[str, CopyOutcome]] = field(default_factory=list)
    followed: list[tuple[str, follow.Followed]] = field(default_factory=list)  # (file, a function given B's)
    left: list[Leftover] = field(default_factory=list)
    skipped: int = 0
    gated: list[tuple[str, int]] = field(default_factory=list)  # (file, gates written there) under --span
    retired: list[tuple[str, int]] = field(default_factory=list)  # (file, line) of each dead gate retired
    live_gates: int = 0  # gates kept: they name the floor, a newer release, or no release

    @property
    def work(self) -> list[Leftover]:
        return [x for x in self.left if x.is_work]


def _text(package: Package, definition: Definition | None) -> str | None:
    if definition is None or not isinstance(definition.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return function_text(package.lines(definition.path), definition.node)


# What a rewrite answers: the tree's path does not reach the definition at B (``gone``), or a patch of it lands
# on a module B's callers no longer read (``patch-lands-elsewhere``). A path B still reaches through a re-export
# (``moved-reexported``) is left as it is: rewriting it would trade the public path for a private module.
_BROKEN_PATH = ("gone", "patch-lands-elsewhere", "patch-target-gone")


def _moves(impact: Impact, b: Resolver) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    patched: set[str] = set()
    for coupling in impact.couplings:
        if coupling.kind not in ("import", "patch") or coupling.status != changes.MOVED:
            continue
        if coupling.rule not in _BROKEN_PATH:
            continue
        new = impact.symbols[coupling.upstream].change.new
        if new is not None and (new.qualname or new.kind == "module"):  # a module moved whole: qualname ""
            out[coupling.upstream] = public_path(b, new)
            if coupling.kind == "patch" and "." not in new.qualname:
                patched.add(coupling.upstream)
    # A patch of a module's name must rebind it where callers read it: its defining module, not a re-export.
    for upstream in patched:
        new = impact.symbols[upstream].change.new
        assert new is not None
        out[upstream] = (new.module, new.qualname)
    return out


def public_path(resolver: Resolver, definition: Definition) -> tuple[str, str]:
    """Where to import ``definition`` from at B: the shortest package above its module that re-exports it under
    its own name, no part of it private (``vllm.config`` for ``vllm.config.vllm.VllmConfig``), else its module.
    A patch is never rewritten to a re-export (it must rebind what callers read): this is for imports' paths."""
    if not definition.qualname:
        return definition.module, ""
    head = definition.qualname.partition(".")[0]
    parts = definition.module.split(".")
    for cut in range(2, len(parts)):  # the top package ``vllm`` serves names lazily: not a path to write
        package = ".".join(parts[:cut])
        if any(p.startswith("_") for p in parts[:cut]):
            break
        found = resolver.resolve(f"{package}.{head}")
        if isinstance(found, Definition) and found.name == f"{definition.module}.{head}":
            return package, definition.qualname
    return definition.module, definition.qualname


def _signature(old: Definition | None, new: Definition | None) -> str:
    def line(d: Definition | None) -> str:
        node = d.node if d is not None else None
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return "-"
        shown = copy.copy(node)  # the def line alone: no body, no decorators (shared node: not changed in place)
        shown.body, shown.decorator_list = [ast.Pass()], []
        return ast.unparse(shown).splitlines()[0]

    return f"A: {line(old)}\nB: {line(new)}"


def build(
    impact: Impact,
    a: Package,
    b: Package,
    only: Collection[str] = PARTS,
    *,
    regenerated: Mapping[str, str] | None = None,
    regions: Mapping[str, Sequence[tuple[int, int]]] | None = None,
    span: Span | None = None,
) -> Plan:
    """The plan for ``impact.root``'s tree: new texts for the files it changes, and what is left.

    ``span``: every edit written in A's form and B's behind the tree's gate (``span``), gates dead from A on
    retired; else B's alone, gates dead from B on retired (``retire``).

    ``bump --adapt`` passes what it regenerates in the same write: ``regions``, the lines of each copy it
    regenerates by path (they are the generator's, so adapt leaves them), and ``regenerated``, each such
    file's new text, which adapt's name rewrites start from (the copies it would re-sync there are left).
    """
    plan = Plan(impact.old, impact.new)
    plan.skipped = len(impact.skipped)
    a_resolver, b_resolver = Resolver(a), Resolver(b)
    moves = _moves(impact, b_resolver) if "names" in only else {}
    verdicts = {(c.site, c.upstream): c.verdict for c in impact.couplings}
    jobs: dict[str, list[CopyJob]] = {}
    follows, followed_sites, details = _follows(plan, impact, b_resolver) if "signatures" in only else ({}, set(), {})
    for c in impact.couplings:
        change = impact.symbols[c.upstream].change if c.upstream in impact.symbols else None
        if change is None:
            continue
        if c.kind == "copy" and "copies" in only:
            if not any(first <= c.line <= last for first, last in (regions or {}).get(c.path, ())):
                _copy(plan, c, change, a, b, jobs, (a_resolver, b_resolver))
        elif (
            c.kind in ("override", "patch")
            and "signature" in change.parts
            and "signatures" in only
            and c.site not in followed_sites
        ):
            plan.left.append(
                Leftover(c.site, "signature", c.upstream, "its signature changed", _signature(change.old, change.new))
            )
        elif c.kind in ("import", "patch") and c.status == changes.REMOVED and "names" in only:
            plan.left.append(
                Leftover(c.site, "name", c.upstream, f"gone at B, with no successor found{_maybe(change)}")
            )
    helpers = dict(impact.helpers) if "gates" in only else {}
    if span is not None and span.helper:
        helpers.setdefault(span.helper, span.op)
    floor = span.old if span is not None else impact.new
    gated_files = set(impact.gated_files) if helpers else set()
    paths = {c.path for c in impact.couplings if c.upstream in moves} | set(jobs) | gated_files | set(follows)
    for path in sorted(paths):
        form = _Form(span, helpers, floor, follows.get(path, []), a_resolver, details)
        _file(plan, impact.root, path, jobs.get(path, []), moves, (regenerated or {}).get(path), b_resolver, form)
    _unreached(plan, impact, moves)
    plan.left = [replace(x, verdict=verdicts.get((x.site, x.upstream), "")) if not x.verdict else x for x in plan.left]
    return plan


def _follows(
    plan: Plan, impact: Impact, b: Resolver
) -> tuple[dict[str, list[follow.Target]], set[str], dict[str, str]]:
    """The tree's functions to follow B's signature, by file; the sites of every coupling they answer for (the
    function's every coupling); and each target's detail for a report: both signatures and upstream's diff."""
    found, _ = signatures.asked(impact)
    texts: dict[str, str] = {}
    for path in {a.path for a in found}:
        try:
            texts[path] = (impact.root / path).read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    by_file, missing = signatures.targets(found, texts, b, impact.passes)
    for a, why in missing:
        plan.left.append(Leftover(a.coupling.site, "signature", a.coupling.upstream, why, _detail(a.change)))
    functions = {(a.path, a.line) for a in found}
    installed = {c.site for c in impact.couplings if c.installs and (c.installs.path, c.installs.line) in functions}
    sites = {c.site for c in impact.couplings if c.kind == "override" and (c.path, c.line) in functions} | installed
    return by_file, sites, {a.coupling.site: _detail(a.change) for a in found}


def _detail(change: changes.Change) -> str:
    shown = _signature(change.old, change.new)
    return f"{shown}\nupstream's diff:\n{change.diff.rstrip()}" if change.diff else shown


def _unreached(plan: Plan, impact: Impact, moves: Mapping[str, tuple[str, str]]) -> None:
    """Every moved coupling adapt neither rewrote nor left with a reason is left too: never silence.

    The rewriter reads dotted ``vllm.`` paths, so a patch through a module alias (``mod.name = ...``) or
    ``setattr(module, "name", ...)`` reaches a moved name where it does not look. A coupling counts as
    handled by a rewrite or a leftover on its line, or, for an import statement over several lines, by as
    many handled sites of the same name in the file as the file has couplings of it.
    """
    handled: dict[tuple[str, str], set[int]] = {}
    for path, r in plan.renamed:
        handled.setdefault((path, r.old), set()).add(r.line)
    # A module the file imports under a name of its own (``from vllm.a import mod as m``), rewritten to where
    # the module went: ``m.name`` reaches B's module now, and each name that went with it needs no edit.
    went = {(path, r.old): r.new for path, r in plan.renamed if r.old in moves and not moves[r.old][1]}
    for x in plan.left:
        path, _, line = x.site.rpartition(":")
        if x.kind in ("name", "guarded") and line.isdigit():
            handled.setdefault((path, x.upstream), set()).add(int(line))
    # A patch of the tree's own name (``mock.patch("plugin.worker.f")``) needs no edit: the import that binds
    # ``f`` there is rewritten, or is left itself.
    moved = [c for c in impact.couplings if c.upstream in moves and c.kind in ("import", "patch") and not c.own]
    per_name = Counter((c.path, c.upstream) for c in moved)
    prefixes = {(path, r.line, r.old) for path, r in plan.renamed}
    for c in moved:
        lines = handled.get((c.path, c.upstream), set())
        if c.line in lines or len(lines) >= per_name[(c.path, c.upstream)]:
            continue
        parts = c.upstream.split(".")
        if any((c.path, c.line, ".".join(parts[:cut])) in prefixes for cut in range(2, len(parts))):
            continue  # its path was rewritten there through a module that moved whole
        module, qualname = moves[c.upstream]
        old_module, _, name = c.upstream.rpartition(".")
        if went.get((c.path, old_module)) == module and qualname == name:
            continue
        where = f"{module}.{qualname}" if qualname else module
        why = f"moved to {where}, reached by a path adapt does not rewrite (a module alias, setattr)"
        plan.left.append(Leftover(c.site, "name", c.upstream, why))


def _copy(
    plan: Plan,
    c: Coupling,
    change: changes.Change,
    a: Package,
    b: Package,
    jobs: dict[str, list[CopyJob]],
    resolvers: tuple[Resolver, Resolver],
) -> None:
    if c.status == changes.REDUNDANT:
        where = change.new.name if change.new else c.upstream
        plan.left.append(Leftover(c.site, "redundant", c.upstream, f"the copy is B's function: {where} can replace it"))
        return
    if c.status == changes.REMOVED:
        plan.left.append(
            Leftover(c.site, "removed", c.upstream, f"B has no such function{_maybe(change)}", change.diff)
        )
        return
    if c.status not in (changes.CHANGED, changes.MOVED):
        return
    a_resolver, b_resolver = resolvers
    base, theirs = _text(a, change.old), _text(b, change.new)
    if base is None or theirs is None:
        plan.left.append(Leftover(c.site, "conflict", c.upstream, "upstream's function cannot be read at A or B"))
        return
    members, assigned, owner, owner_name = _class_of(b_resolver, change.new)
    module = change.new.module if change.new is not None else ""
    jobs.setdefault(c.path, []).append(
        CopyJob(
            c.line,
            c.upstream,
            base,
            theirs,
            members,
            assigned,
            owner,
            imports.providers(b_resolver, module),
            module,
            _set_in(b_resolver, change.new),
            setups.set_up(a_resolver, b_resolver, change.old, change.new),
            owner_name,
        )
    )


def _maybe(change: changes.Change) -> str:
    """A removed name's namesakes at B, none of them shown to be where it went (``changes.Mover``)."""
    _, found, maybe = change.detail.partition("; moved? not shown: ")
    return f" (moved? not shown: {maybe})" if found else ""


def _owner(resolver: Resolver, method: Definition | None) -> Definition | None:
    """B's class of a copied method; None for a function."""
    if method is None or "." not in method.qualname:
        return None
    owner = resolver.resolve(method.name.rpartition(".")[0])
    return owner if isinstance(owner, Definition) and owner.kind == "class" else None


def _class_of(resolver: Resolver, method: Definition | None) -> tuple[frozenset[str] | None, frozenset[str], str, str]:
    """What B's class of a copied method gives its instances (inherited.provides), its own name and its
    canonical one."""
    owner = _owner(resolver, method)
    if owner is None:
        return None, frozenset(), "", ""
    return (*inherited.provides(resolver, owner), owner.qualname.rpartition(".")[2], owner.name)


def _set_in(resolver: Resolver, method: Definition | None) -> dict[str, frozenset[str]]:
    """What B's class of a copied method assigns on ``self`` in its other methods (inherited.set_in_methods)."""
    owner = _owner(resolver, method)
    return {} if owner is None else inherited.set_in_methods(resolver, owner)


@dataclass(frozen=True)
class _Form:
    """How a file's edits are written: behind the gate (``span``) or for B alone; and the gates retired from
    ``floor`` on (``helpers``: none when gates are not a part of this run)."""

    span: Span | None
    helpers: Mapping[str, str]
    floor: str
    follows: Sequence[follow.Target] = ()  # the file's functions to follow B's signature
    a: Resolver | None = None  # A's resolver: what a vLLM class's constructor took at A
    details: Mapping[str, str] = field(default_factory=dict)  # each target's signatures and diff, by site


def _file(
    plan: Plan,
    root: Path,
    path: str,
    jobs: list[CopyJob],
    moves: dict[str, tuple[str, str]],
    start: str | None,
    b_resolver: Resolver,
    form: _Form,
) -> None:
    where = root / path
    try:
        data = where.read_bytes()
        text = data.decode("utf-8")
        newer_syntax.parse(text, path)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        plan.skipped += 1
        plan.left.append(Leftover(path, "skipped", "", f"not read: {type(exc).__name__}"))
        return
    if start is not None:
        # The bump regenerates a copy in this file: the copies adapt would merge are placed by line in
        # the text as read, which the regeneration moved; they are left for `adapt` after the bump.
        for job in jobs:
            why = f"its file holds a copy this bump regenerates: run `adapt --from {plan.old}` after it"
            plan.left.append(Leftover(f"{path}:{job.line}", "regenerated", job.upstream, why))
        jobs, text = [], start
    started = text
    counts = (len(plan.merged), len(plan.renamed), len(plan.followed))
    if jobs:
        module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        bindings = imports.Bindings(
            b_resolver, newer_syntax.parse(text, path)[0], module, package=path.endswith("__init__.py")
        )
        new, outcomes = resync_file(text, jobs, bindings, form.span)
    else:
        new, outcomes = text, []
    for outcome in outcomes:
        site = f"{path}:{outcome.line}"
        result = outcome.result
        if isinstance(result, Merged):
            plan.merged.append((path, outcome))
        elif isinstance(result, Conflict):
            shown = "\n".join(
                f"{label}:\n{body.rstrip()}"
                for label, body in (("A", result.base), ("tree", result.ours), ("B", result.theirs))
                if body
            )
            diff = next((j for j in jobs if j.line == outcome.line), None)
            plan.left.append(Leftover(site, "conflict", outcome.upstream, result.reason, shown + _diff(diff)))
        elif isinstance(result, Redundant):
            plan.left.append(
                Leftover(site, "redundant", outcome.upstream, "the copy is B's function: upstream's can replace it")
            )
        elif isinstance(result, Unchanged):  # impact compares more than the merge does
            why = "upstream's statements are the same at A and B (a docstring, a comment, an annotation's spelling)"
            plan.left.append(Leftover(site, "unchanged", outcome.upstream, why))
    new, rewrites, left = names.rewrite(new, moves, form.span)
    plan.renamed += [(path, r) for r in rewrites]
    plan.left += [Leftover(f"{path}:{n.line}", n.kind, n.name, n.why) for n in left]
    if form.follows:
        assert form.a is not None
        lookup = signatures.Lookup(form.a, b_resolver)
        new, done, refused = follow.follow(new, form.follows, lookup, form.span)
        plan.followed += [(path, f) for f in done]
        for x in refused:
            kind = "parameter" if x.work else "signature"
            plan.left.append(Leftover(x.site, kind, x.upstream, x.why, form.details.get(x.site, "")))
    written = new.count(form.span.test) - started.count(form.span.test) if form.span and form.span.helper else 0
    if form.span is not None and written and not _reaches_helper(path, new, form.span):
        # a file outside the helper's package that imports nothing of it (an example, a script run on its
        # own): importing the gate there may fail where it runs; plain adapt's B-only form would drop A
        merged, renamed, followed = counts
        del plan.merged[merged:], plan.renamed[renamed:], plan.followed[followed:]
        why = (
            f"under --span: the file imports nothing of {(form.span.helper or '').split('.')[0]} (run on its own?), so "
            f"its gate cannot be imported there safely; plain adapt's edits of it are left for a person"
        )
        plan.left.append(Leftover(path, "unspanned", "", why))
        new, written = started, 0
    if form.span is not None and written:
        new = _with_helper(new, form.span)
        plan.gated.append((path, written))
    if form.helpers:
        new = _retire(plan, path, new, form, written)
    if new != started:
        plan.read[where] = data
        plan.write[where] = new.encode("utf-8")


def _reaches_helper(path: str, text: str, span: Span) -> bool:
    """The gate helper can be imported where the file runs: the file is in the helper's package, a test (run
    in the tree, where the package is), or already imports from it."""
    package = (span.helper or "").split(".")[0]
    if path.split("/")[0] == package or is_test(path):
        return True
    module = newer_syntax.parse(text, "<tree>")[0]
    for n in ast.walk(module):
        if isinstance(n, ast.Import) and any(a.name.split(".")[0] == package for a in n.names):
            return True
        if isinstance(n, ast.ImportFrom) and not n.level and (n.module or "").split(".")[0] == package:
            return True
    return False


def _with_helper(text: str, span: Span) -> str:
    """The gate helper imported where the file does not bind its name yet (after its imports above the first
    gate written), as the file's neighbours import it: ``from <its module> import <it>``."""
    module = newer_syntax.parse(text, "<tree>")[0]
    bound = {
        (a.asname or a.name).split(".")[0]
        for n in ast.walk(module)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    bound |= {n.name for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if span.name in bound:
        return text
    first = next(n for n, line in enumerate(text.splitlines(), 1) if span.test in line)
    return imports.insert(text, [span.import_line], first)


def _retire(plan: Plan, path: str, text: str, form: _Form, written: int) -> str:
    """The file's gates dead from ``form.floor`` on retired; what could not be is reported. ``written``: the
    gates this run wrote in the file (live, not the tree's own)."""
    new, done = retire(text, form.helpers, form.floor)
    plan.retired += [(path, line) for line in done.retired]
    plan.live_gates += len(done.live) - written
    for line, why in done.constant:
        plan.left.append(Leftover(f"{path}:{line}", "gate", "", f"a dead version gate used as a value is {why}"))
    for line, why in done.undecided:
        plan.left.append(Leftover(f"{path}:{line}", "gate", "", f"a version gate not decided statically: {why}"))
    for line in done.skipped_always:
        why = "a test skipped at every release the tree runs on: its skipif's gate is always true; drop the test?"
        plan.left.append(Leftover(f"{path}:{line}", "gate", "", why))
    return new


def _diff(job: CopyJob | None) -> str:
    if job is None:
        return ""
    import difflib

    lines = difflib.unified_diff(job.base.splitlines(keepends=True), job.theirs.splitlines(keepends=True), "A", "B")
    return "\nupstream's diff:\n" + "".join(lines).rstrip()

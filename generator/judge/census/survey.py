"""Every function in a tree that is a copy of a vLLM function: which one, its closest release, how stale.

``census`` reads two things. An *index* of upstream functions, from ONE vLLM source tree (an
installed vLLM's package folder, or any folder holding ``vllm/``): every ``def`` in it, by name. And
the tree: every ``def`` in every ``.py`` file under its root (hidden folders, virtualenvs and
``__pycache__`` left out). A tree function is compared with each upstream function of the same
name, statement by statement as ``migrate`` compares (``provenance``: a compound statement by its
header, formatting and comments not counting), and is a *copy* when

- at least ``MIN_MATCHED`` statements (the ``def`` line counts as one) are the same, in order, and
- they are at least ``MIN_SHARE`` of the statements of the longer of the two.

Of several upstream functions that qualify, the one with the fewest differing statements is named
(then the one whose file and class names are most alike); the others are listed in the JSON.

With ``renamed``, a tree function no same-named upstream function matches is compared with every
upstream function (the same thresholds): copies kept under another name (``_patched_forward``).

For each copy, that upstream file is then read at every final release from ``--since`` on (release
wheels from the package index by range reads, one session per release, cached by tag and path:
``resolve.fetch_release_files``), and the copy is compared with the function of the same qualified
name there. The *closest release* has the fewest differing statements (0: the copy is that release's
function); of several, the pin, else the newest before it, else the oldest after it. The releases
whose function is the closest one's, statement for statement, are reported with it. *Stale by N*
counts releases from the closest to the pin (negative: the copy is newer than the pin). Only files
that hold a copy are read across releases.

What is not found: a copy renamed from its upstream function (unless ``renamed``), and a copy of a
function the index's vLLM no longer has (index an older vLLM with ``--vllm-source``). A copy whose
upstream function changed too much by the index's release to pass the thresholds there is missed too.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib.util
import json
import math
import os
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from generator import provenance
from generator.errors import UsageError
from generator.pin import version_of
from generator.sources.base import Progress, no_progress
from generator.sources.releases import version_key

# A copy shares at least this many statements with its upstream function (the def line is one):
# below it, one-line accessors and `super().__init__(...)` wrappers would match by chance.
MIN_MATCHED = 6
# ... and they are at least this share of the longer function's statements: a copy keeps most of
# upstream's statements and adds fewer than it keeps.
MIN_SHARE = 0.5
# Folders of a tree that hold no source of its own.
_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__"})
_BLOCKS = ("body", "handlers", "orelse", "finalbody", "cases")

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(eq=False)
class Function:
    """One ``def`` of a file: where it is, its qualified name (``Class.method``) and its statements.

    A census holds statement keys, not syntax trees: ``settle`` reduces a function and drops its node.
    """

    path: str  # relative to the tree's or the source's root, with / separators
    qualname: str
    name: str
    line: int
    size: int  # statements as provenance counts them, without reducing
    node: FunctionNode | None = field(default=None, repr=False)
    _keys: tuple[int, ...] | None = field(default=None, repr=False)

    @property
    def keys(self) -> tuple[int, ...]:
        """``provenance.reduce(node).keys``, computed once."""
        if self._keys is None:
            if self.node is None:
                raise ValueError(f"{self.path}:{self.line} {self.qualname} was settled without its statements")
            self._keys = statement_keys(self.node)
        return self._keys

    def settle(self, reduce: bool) -> None:
        """Keep the keys (when ``reduce`` and the function is big enough to be compared), drop the node."""
        if reduce and self.size >= MIN_MATCHED:
            self.keys  # noqa: B018 - computed for its side effect
        self.node = None

    def method(self) -> provenance.Method:
        """The statements with their lines and text, for a copy's edits (the node must be there)."""
        if self.node is None:
            raise ValueError(f"{self.path}:{self.line} {self.qualname} has no node to reduce")
        return provenance.reduce(self.node)  # type: ignore[arg-type]


def statement_keys(func: FunctionNode) -> tuple[int, ...]:
    """``provenance.reduce(func).keys`` without each statement's text for messages, which costs a third more.

    The same walk as ``provenance._walk`` (tests hold the two equal on upstream's files).
    """
    keys = [provenance._intern(0, ast.dump(provenance._header(func)))]

    def walk(node: ast.AST, depth: int) -> None:
        keys.append(provenance._intern(depth, ast.dump(provenance._header(node))))
        for name in _BLOCKS:
            children = getattr(node, name, None)
            if not (isinstance(children, list) and children):
                continue
            if name not in ("body", "handlers", "cases"):
                keys.append(provenance._intern(depth, f"<{name}>"))
            for child in children:
                walk(child, depth + 1)

    for node in func.body:
        walk(node, 1)
    return tuple(keys)


def _count(nodes: Sequence[ast.AST]) -> tuple[int, bool]:
    """Statements below ``nodes`` as ``provenance.statements`` yields them, and whether a ``match`` is among them."""
    total, has_match = 0, False
    for node in nodes:
        total += 1
        has_match = has_match or type(node).__name__ == "Match"
        for name in _BLOCKS:
            children = getattr(node, name, None)
            if not (isinstance(children, list) and children):
                continue
            if name not in ("body", "handlers", "cases"):  # `else:` and `finally:` count as statements
                total += 1
            n, nested = _count(children)
            total, has_match = total + n, has_match or nested
    return total, has_match


def _number_cases(func: ast.AST) -> None:
    # ``match_case`` has no line numbers, which provenance reads of every statement: the pattern's.
    for node in ast.walk(func):
        cases = getattr(node, "cases", None)
        if type(node).__name__ == "Match" and isinstance(cases, list):
            for case in cases:
                case.lineno = case.pattern.lineno
                case.end_lineno = case.pattern.end_lineno


def functions(tree: ast.Module, path: str) -> list[Function]:
    """Every ``def`` in ``tree`` (methods, nested functions, those under ``if``/``try``), outermost first."""
    out: list[Function] = []

    def visit(body: Sequence[ast.AST], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size, has_match = _count(node.body)
                if has_match:
                    _number_cases(node)
                qualname = prefix + node.name
                out.append(Function(path, qualname, node.name, node.lineno, size + 1, node))
                visit(node.body, f"{qualname}.<locals>.")
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            else:
                for name in _BLOCKS:
                    children = getattr(node, name, None)
                    if isinstance(children, list):
                        visit(children, prefix)

    visit(tree.body, "")
    return out


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


def _python_files(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(folder) / name


def read_functions(
    root: Path, skipped: list[Skipped], reduce: Callable[[str], bool] = lambda _: True
) -> tuple[list[Function], int]:
    """Every function of every ``.py`` file under ``root``, and how many files parsed (the rest: ``skipped``).

    Each is settled: reduced when big enough and ``reduce(name)`` (upstream has a function so named).
    """
    out: list[Function] = []
    parsed = 0
    for file in _python_files(root):
        rel = file.relative_to(root).as_posix()
        try:
            data = file.read_bytes()
        except OSError as exc:
            skipped.append(Skipped(rel, f"cannot be read ({exc.strerror or exc})"))
            continue
        try:
            tree = ast.parse(data, filename=rel)
        except (SyntaxError, ValueError) as exc:  # ValueError: null bytes
            line = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
            skipped.append(Skipped(rel, f"does not parse{line}"))
            continue
        except RecursionError:
            skipped.append(Skipped(rel, "nests too deeply to parse"))
            continue
        parsed += 1
        found = functions(tree, rel)
        for func in found:
            func.settle(reduce(func.name))
        out.extend(found)
    return out, parsed


@dataclass(frozen=True)
class Source:
    """The vLLM tree the index is read from: its ``vllm`` package folder and the version, if known."""

    package: Path
    version: str | None
    origin: str  # "installed" or the path given


def vllm_source(path: Path | None = None) -> Source:
    """``path`` (the ``vllm`` package folder, or a folder holding it), else the interpreter's installed vLLM."""
    if path is None:
        spec = importlib.util.find_spec("vllm")  # finds the package without importing it
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if not locations:
            raise UsageError("no vLLM is installed in this interpreter: pass --vllm-source PATH (a vLLM source tree)")
        package = Path(locations[0])
        try:
            version: str | None = metadata.version("vllm")
        except metadata.PackageNotFoundError:
            version = None
        return Source(package, version, "installed")
    package = path / "vllm" if (path / "vllm" / "__init__.py").is_file() else path
    if not (package / "__init__.py").is_file() or package.name != "vllm":
        raise UsageError(
            f"--vllm-source {path} is neither vLLM's package folder (vllm/ with __init__.py) nor a folder holding it"
        )
    return Source(package, _version_in(package), str(path))


def _version_in(package: Path) -> str | None:
    """The version a vLLM source tree says it is: its dist-info beside it, else its ``_version.py``."""
    for info in sorted(package.parent.glob("vllm-*.dist-info")):
        try:
            return metadata.Distribution.at(info).version
        except (OSError, ValueError):
            continue
    version_file = package / "_version.py"
    if version_file.is_file():
        found = _VERSION_LINE.search(version_file.read_text(errors="replace"))
        if found is not None:
            return found[1]
    return None


# What vLLM's generated _version.py says: ``__version__ = version = '0.30.0'``.
_VERSION_LINE = re.compile(r"^__version__\s*=\s*(?:version\s*=\s*)?['\"](\d[^'\"]*)['\"]", re.M)


def defined_names(package: Path) -> set[str]:
    """Every name a ``def`` in the package's files gives (a superset: a ``def`` in a string counts too)."""
    names: set[str] = set()
    for file in _python_files(package):
        try:
            names.update(m.decode("utf-8", errors="replace") for m in _DEF.findall(file.read_bytes()))
        except OSError:
            continue
    return names


_DEF = re.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)", re.M)


class UpstreamIndex:
    """The functions of one vLLM source tree big enough to be compared, by name, as statement keys."""

    def __init__(self, source: Source, names: Collection[str] | None = None) -> None:
        """Read ``source``; with ``names``, keep only functions so named (the ones a tree can match)."""
        self.source = source
        self.by_name: dict[str, list[Function]] = defaultdict(list)
        self.skipped: list[Skipped] = []
        self.files = 0
        root = source.package.parent
        for file in _python_files(source.package):
            rel = file.relative_to(root).as_posix()
            try:
                tree = ast.parse(file.read_bytes(), filename=rel)
            except (OSError, SyntaxError, ValueError, RecursionError) as exc:
                self.skipped.append(Skipped(rel, type(exc).__name__))
                continue
            self.files += 1
            for func in functions(tree, rel):
                if func.size >= MIN_MATCHED and (names is None or func.name in names):
                    func.settle(True)
                    self.by_name[func.name].append(func)
        self._inverted: dict[str, Table] = {}
        self._everything: Table | None = None

    def candidates(self, name: str) -> list[Function]:
        return self.by_name.get(name, [])

    def inverted(self, name: str) -> Table:
        """For the functions named ``name`` big enough to match: statement key -> (function, times it has it)."""
        if name not in self._inverted:
            self._inverted[name] = _table(self.candidates(name))
        return self._inverted[name]

    def everything(self) -> Table:
        """The same for every function the index holds, whatever its name (``--renamed``)."""
        if self._everything is None:
            self._everything = _table(f for group in self.by_name.values() for f in group)
        return self._everything


# Statement key -> (function, times it has it), for the functions big enough to match.
Table = dict[int, list[tuple[Function, int]]]


def _table(funcs: Iterable[Function]) -> Table:
    table: Table = defaultdict(list)
    for func in funcs:
        if func.size >= MIN_MATCHED:
            for key, times in Counter(func.keys).items():
                table[key].append((func, times))
    return table


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


# --- Across releases: the closest release of each copy's upstream function.

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
        funcs = functions(_parse(text, path), path)
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


def _parse(text: str | bytes, path: str) -> ast.Module:
    try:
        return ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError):
        return ast.Module(body=[], type_ignores=[])


def _variants(
    text: str, path: str, qualnames: Collection[str], by_text: dict[str, tuple[int, ...]]
) -> dict[str, list[tuple[int, ...]]]:
    """The keys of each def of ``qualnames`` in a release file; nothing of the parse is kept."""
    lines = text.splitlines()
    out: dict[str, list[tuple[int, ...]]] = defaultdict(list)
    for func in functions(_parse(text, path), path):
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


# --- The whole census.


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


def _outermost(matches: list[Match]) -> list[Match]:
    """A function nested in a copy is part of that copy (0.32's schedule() defines ``skip_request``), not another."""
    copied = {(m.function.path, m.function.qualname) for m in matches}

    def inside_a_copy(m: Match) -> bool:
        parts = m.function.qualname.split(".<locals>.")
        return any((m.function.path, ".<locals>.".join(parts[:i])) in copied for i in range(1, len(parts)))

    return [m for m in matches if not inside_a_copy(m)]


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
    upstream_names = None if renamed else defined_names(source.package)
    tree_functions, files = read_functions(
        root, skipped, (lambda _: True) if upstream_names is None else upstream_names.__contains__
    )
    names = {f.name for f in tree_functions if f.size >= MIN_MATCHED}
    seconds = {"tree": time.monotonic() - clock}
    progress(f"read {len(tree_functions)} functions in {root}; indexing vLLM's in {source.package}")
    clock = time.monotonic()
    index = UpstreamIndex(source, None if renamed else names)
    seconds["index"] = time.monotonic() - clock
    clock = time.monotonic()
    matches = [
        m
        for f in tree_functions
        if (m := match(f, index) or (match_renamed(f, index) if renamed else None)) is not None
    ]
    matches = _outermost(matches)
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
        nodes = {(f.qualname, f.line): f.node for f in functions(_parse((root / path).read_bytes(), path), path)}
        for func in funcs:
            func.node = nodes.get((func.qualname, func.line))
            if func.node is None:
                raise UsageError(f"{root / path} changed while the census read it: run it again")


def release_reader(progress: Progress = no_progress, refresh: bool = False) -> ReleaseReader:
    """Reads from the release wheels on the package index, through the cache (``resolve.fetch_release_files``)."""
    from generator.sources.resolve import fetch_release_files

    def read(tag: str, paths: Collection[str]) -> dict[str, str | None]:
        found = fetch_release_files(tag, paths, progress, refresh=refresh)
        return {p: None if data is None else data.decode("utf-8", errors="replace") for p, data in found.items()}

    return read


# --- Output.

_HEADERS = ("function", "file:line", "upstream", "closest", "stale by", "differing")


def _closest(dated: Dated) -> str:
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
        closest, stale, differing = "-", "-", str(copy.match.comparison.differing)
    else:
        closest = _closest(dated)
        stale = "?" if dated.stale is None else str(dated.stale)
        differing = str(dated.differing)
    return (copy.function.qualname, where, copy.upstream_name, closest, stale, differing)


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
        f"index: {version} at {census.source.package} ({census.upstream_files} files); releases: {span}; "
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
        "index": {"package": str(census.source.package), "version": census.source.version},
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


# --- The command (generator/cli.py adds it: ``main.add_command(census_command())``).


def census_command() -> Any:
    """``balance-patchgen census``: a click command reading ``--root`` from the group's context."""
    import click

    from generator.pin import PIN_FILE, read_pin, validate_tag
    from generator.provenance import FIRST_RELEASE

    @click.command(name="census")
    @click.option(
        "--vllm-source",
        "source_path",
        type=click.Path(file_okay=False, exists=True, path_type=Path),
        help="vLLM source tree to index: its vllm/ package folder or a folder holding it "
        "(default: the vLLM installed in this interpreter).",
    )
    @click.option(
        "--since",
        default=FIRST_RELEASE,
        show_default=True,
        metavar="TAG",
        help="Find each copy's closest release among the final releases from TAG on.",
    )
    @click.option("--tag", help="The vLLM release the tree runs with (default: the tree's pin file).")
    @click.option(
        "--releases/--no-releases",
        default=True,
        show_default=True,
        help="Read each copy's upstream file at every release (package index, cached); without: the index only.",
    )
    @click.option(
        "--renamed",
        is_flag=True,
        help="Also compare functions no same-named upstream function matches with every upstream function (slower).",
    )
    @click.option("--edits", "show_edits", is_flag=True, help="Also list each copy's differing statements.")
    @click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
    @click.option("--refresh", is_flag=True, help="Ignore cached upstream files and read the releases again.")
    @click.pass_context
    def census_cmd(
        ctx: click.Context,
        source_path: Path | None,
        since: str,
        tag: str | None,
        releases: bool,
        renamed: bool,
        show_edits: bool,
        fmt: str,
        refresh: bool,
    ) -> None:
        """Every function in --root's tree that is a copy of a vLLM function, its closest release and staleness.

        A tree function is a copy of the same-named upstream function when at least 6 statements,
        and at least half of the longer one's, are the same in order (statements as `migrate`
        compares them: formatting and comments do not count).
        """
        root_obj = ctx.find_root().obj
        root = root_obj if isinstance(root_obj, Path) else Path(".")
        if not root.is_dir():
            raise UsageError(f"--root {root} is not a folder: pass the tree to survey")

        def progress(message: str) -> None:
            click.echo(f"balance-patchgen: {message}", err=True)

        since = validate_tag(since, origin="--since")
        if tag is not None:
            pin: str | None = validate_tag(tag, origin="--tag")
        elif (root / PIN_FILE).exists():
            pin = read_pin(root / PIN_FILE)
        else:
            pin = None
            progress(f"{root} has no {PIN_FILE}: staleness is not counted (pass --tag)")
        source = vllm_source(source_path)
        if pin is not None and source.version is not None and f"v{source.version}" != pin:
            progress(
                f"the index is vLLM {source.version} ({source.package}), the tree pins {pin}: functions "
                f"vLLM {source.version} lacks are not found; pass --vllm-source a vLLM {pin} tree to index that"
            )
        tags: list[str] = []
        read: ReleaseReader | None = None
        if releases:
            from generator.sources.releases import released_tags

            tags = released_tags(since)
            read = release_reader(progress, refresh=refresh)
        result = run(root, source, pin, tags, read, progress, renamed=renamed)
        if fmt == "json":
            click.echo(to_json_text(result), nl=False)
        else:
            for line in text_lines(result, show_edits):
                click.echo(line)

    return census_cmd

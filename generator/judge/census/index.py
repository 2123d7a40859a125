"""The upstream index: the functions of one vLLM source tree big enough to be compared, by name."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import multiprocessing
import os
import re
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from generator.errors import FileRefused, UsageError
from generator.judge.census.reading import MIN_MATCHED, Function, Skipped, functions
from generator.sources import cache, package
from generator.sources.base import Progress, no_progress
from generator.sources.package import Package
from generator.tags import is_release_tag, version_of


@dataclass(frozen=True)
class Source:
    """The vLLM tree the index is read from: its package's files, the version (if known) and where it is."""

    files: Package
    version: str | None
    origin: str  # "release", "installed" or the path given
    where: str  # for messages and the report: a folder, or the release's wheel


def vllm_source(path: Path | None = None) -> Source:
    """``path`` (the ``vllm`` package folder, or a folder holding it), else the interpreter's installed vLLM."""
    if path is None:
        spec = importlib.util.find_spec("vllm")  # finds the package without importing it
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if not locations:
            raise UsageError("no vLLM is installed in this interpreter: pass --vllm-source PATH (a vLLM source tree)")
        folder = Path(locations[0])
        try:
            version: str | None = metadata.version("vllm")
        except metadata.PackageNotFoundError:
            version = None
        return Source(package.folder(folder, "installed"), version, "installed", str(folder))
    files = package.folder(path, str(path))
    folder = path / "vllm" if (path / "vllm" / "__init__.py").is_file() else path
    return Source(files, _version_in(folder), str(path), str(folder))


def release_source(tag: str, progress: Progress = no_progress, *, refresh: bool = False) -> Source:
    """Release ``tag``'s own files (its wheel on the package index, cached): what a tree pinned to it runs."""
    files = package.release(tag, progress, refresh=refresh)
    return Source(files, version_of(tag), "release", f"vLLM {tag}'s wheel ({files.origin})")


def package_source(files: Package) -> Source:
    """Any package already read (a git ref, a release)."""
    version = version_of(files.label) if is_release_tag(files.label) else None
    return Source(files, version, files.origin, f"vLLM {files.label} ({files.origin})")


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


def defined_names(files: Package) -> set[str]:
    """Every name a ``def`` in the package's files gives (a superset: a ``def`` in a string counts too)."""
    names: set[str] = set()
    for path in files.paths:
        text = files.text(path)
        if text is not None:
            names.update(_DEF.findall(text))
    return names


_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)", re.M)


# The cached index's format: bump it when statement keys or what the index holds change.
INDEX_FORMAT = 1


class UpstreamIndex:
    """The functions of one vLLM source tree big enough to be compared, by name, as statement keys.

    A release's index is cached beside its files (``census-index-vN.json``): every function of the
    package, so any tree's names find theirs; building it parses every file of the release.
    """

    def __init__(self, source: Source, names: Collection[str] | None = None) -> None:
        """Read ``source``; with ``names``, keep only functions so named (the ones a tree can match)."""
        self.source = source
        self.by_name: dict[str, list[Function]] = defaultdict(list)
        self.skipped: list[Skipped] = []
        self.files = 0
        release = source.files.origin in ("release", "cache") and is_release_tag(source.files.label)
        loaded = _load(source.files.label) if release else None
        functions_found = loaded if loaded is not None else self._read(None if release else names)
        if release and loaded is None:
            _store(source.files.label, self.files, functions_found)
        if loaded is not None:
            self.files = len(source.files.paths)
        for func in functions_found:
            if names is None or func.name in names:
                self.by_name[func.name].append(func)
        self._inverted: dict[str, Table] = {}
        self._everything: Table | None = None

    def _read(self, names: Collection[str] | None) -> list[Function]:
        global _READING  # what forked workers inherit, without sending it to each
        _READING = (self.source.files, None if names is None else frozenset(names))
        paths = sorted(self.source.files.paths)
        cores = os.cpu_count() or 1
        try:
            if len(paths) < _PARALLEL_FROM or cores < 2 or "fork" not in multiprocessing.get_all_start_methods():
                read = [_read_file(rel) for rel in paths]
            else:
                with multiprocessing.get_context("fork").Pool(min(cores, 2)) as pool:  # others share the machine
                    read = pool.map(_read_file, paths, chunksize=32)
        finally:
            _READING = None
        out = []
        for rel, failed, found in read:  # in the files' order, however the workers took them
            if failed:
                self.skipped.append(Skipped(rel, failed))
                continue
            self.files += 1
            out += found
        return out

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


_PARALLEL_FROM = 256  # files to read before worker processes pay for their start
_READING: tuple[Package, frozenset[str] | None] | None = None  # the package being read, and the names kept


def _read_file(rel: str) -> tuple[str, str, list[Function]]:
    """One file's functions big enough to compare (and so named), as statement keys; or why it does not parse."""
    assert _READING is not None
    files, names = _READING
    try:
        tree = ast.parse(files.text(rel) or "", filename=rel)
    except (SyntaxError, ValueError, RecursionError) as exc:
        return rel, type(exc).__name__, []
    out = []
    for func in functions(tree, rel):
        if func.size >= MIN_MATCHED and (names is None or func.name in names):
            func.settle(True)
            out.append(func)
    return rel, "", out


def _entry(tag: str) -> Path:
    return cache.cache_root() / "upstream" / tag / f"census-index-v{INDEX_FORMAT}.json"


def _load(tag: str) -> list[Function] | None:
    data = cache.load_at(_entry(tag))
    if data is None:
        return None
    try:
        rows = json.loads(data)["functions"]
        return [
            Function(path, qualname, name, line, size, None, tuple(keys))
            for path, qualname, name, line, size, keys in rows
        ]
    except (ValueError, KeyError, TypeError):
        return None  # an entry from another format: built again


def _store(tag: str, files: int, found: Iterable[Function]) -> None:
    rows = [[f.path, f.qualname, f.name, f.line, f.size, list(f.keys)] for f in found]
    with contextlib.suppress(OSError, FileRefused):  # unwritable: the index is built again next time
        cache.store_at(_entry(tag), json.dumps({"files": files, "functions": rows}, separators=(",", ":")).encode())


# Statement key -> (function, times it has it), for the functions big enough to match.
Table = dict[int, list[tuple[Function, int]]]


def _table(funcs: Iterable[Function]) -> Table:
    table: Table = defaultdict(list)
    for func in funcs:
        if func.size >= MIN_MATCHED:
            for key, times in Counter(func.keys).items():
                table[key].append((func, times))
    return table

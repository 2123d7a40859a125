"""A tree's files read once for both readers (``sites``, census's functions), each reading cached by its digest.

Reading a file (parsing it, its sites, classes and calls, the statement keys of its functions that
release A names) depends on the file's bytes, its path in the tree (its module's name), release A and
this tool's reading code: the cache key is the digest of the first two, in a pack per tree and release
A, under a folder named by the digest of the last (the reading modules' own source, and Python's
version: ``ast`` differs between them). So an entry never outlives the code that
wrote it, and a run with the cache gives the same result as one without it (a test holds to that).
What is missing is read in worker processes when there is much of it and more than one core.

A tree's entries are one pack (a pickle under the tool's cache folder, checked by its sha256 sidecar
like every cache entry): one read when nothing changed, one write when something did.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import pickle
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from generator.judge import gates, provenance
from generator.judge.census import newer_syntax, reading
from generator.judge.census.reading import Function, Skipped
from generator.judge.couplings import bindings, classbody, objects, signatures, sites
from generator.sources import cache
from generator.sources.base import Progress

NO_CACHE_ENV = "BALANCE_PATCHGEN_NO_READ_CACHE"  # set (to anything but ""): read every file afresh
_PARALLEL_FROM = 64  # files to read before worker processes pay for their start
_READERS = (sites, bindings, classbody, objects, gates, signatures, reading, newer_syntax, provenance)


@dataclass
class Tree:
    scans: list[sites.FileScan]
    functions: list[Function]
    files: int
    skipped: list[Skipped]
    cached: int = 0  # files whose reading came from the cache


# One file's reading: its scan and functions, or why it was skipped.
Entry = tuple[sites.FileScan, list[Function]] | Skipped


def version() -> str:
    """The digest of the code that reads a file: an entry written by other code is never read back."""
    digest = hashlib.sha256(f"{sys.version_info[0]}.{sys.version_info[1]}".encode())
    for module in _READERS:
        digest.update(Path(module.__file__ or "").read_bytes())
    return digest.hexdigest()[:16]


_NAMES: frozenset[str] = frozenset()  # release A's function names, set before the workers fork


def read_one(item: tuple[str, str]) -> Entry:
    """The file at ``rel`` with text ``text`` read: parsed once, for its sites and its functions."""
    rel, text = item
    skipped: list[Skipped] = []
    newer: list[Skipped] = []
    tree = reading.parse(text, rel, skipped, newer)
    if tree is None:
        return skipped[0]
    scan = sites.scan(tree, rel, text)
    scan.syntax = newer[0].reason if newer else ""
    functions = reading.functions(tree, rel)
    for func in functions:
        func.settle(func.name in _NAMES)  # keys only for what A's index can match (they cost more than parsing)
    return scan, functions


def _pack(root: Path, paths: Sequence[Path], release: str) -> Path:
    """One pack per tree and release A (whose function names decide which functions' keys are kept)."""
    where = hashlib.sha256("\0".join([release, str(root.resolve()), *map(str, paths)]).encode()).hexdigest()[:24]
    return cache.cache_root() / "couplings-read" / version() / f"{where}.pickle"


def _load(pack: Path) -> dict[str, Entry]:
    data = cache.load_at(pack)
    if data is None:
        return {}
    try:
        found = pickle.loads(data)
    except Exception:
        return {}
    return found if isinstance(found, dict) else {}


def _read_all(items: list[tuple[str, str]]) -> list[Entry]:
    cores = os.cpu_count() or 1
    if len(items) < _PARALLEL_FROM or cores < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [read_one(item) for item in items]
    with multiprocessing.get_context("fork").Pool(min(cores, 2)) as pool:  # the machine's others share it
        return pool.map(read_one, items, chunksize=16)


def read_tree(root: Path, paths: Sequence[Path], release: str, names: set[str], progress: Progress) -> Tree:
    """Every ``.py`` file under ``root`` (or under ``paths`` in it), each read once for both readers.

    ``names``: release A's (``release``'s) function names; a tree's function of such a name keeps its
    statement keys, for census's matching.
    """
    global _NAMES  # what forked workers inherit, without sending it to each
    _NAMES = frozenset(names)
    use_cache = not os.environ.get(NO_CACHE_ENV, "")
    pack = _pack(root, paths, release)
    known = _load(pack) if use_cache else {}
    order: list[tuple[str, str | Skipped]] = []  # (rel, digest or why it was not read)
    missing: dict[str, tuple[str, str]] = {}
    folders = [root / p for p in paths] if paths else [root]
    for folder in folders:
        for file in reading.python_files(folder) if folder.is_dir() else [folder] if folder.is_file() else []:
            rel = file.relative_to(root).as_posix()
            try:
                data = file.read_bytes()
                text = data.decode("utf-8")
            except OSError as exc:
                order.append((rel, Skipped(rel, f"cannot be read ({exc.strerror or exc})")))
                continue
            except UnicodeDecodeError as exc:
                order.append((rel, Skipped(rel, f"is not UTF-8 (byte {exc.start})")))
                continue
            digest = hashlib.sha256(rel.encode() + b"\0" + data).hexdigest()
            order.append((rel, digest))
            if digest not in known:
                missing[digest] = (rel, text)
    read = dict(zip(missing, _read_all(list(missing.values())), strict=True))
    entries = {**known, **read}
    scans, functions, skipped = [], [], []
    for _, key in order:
        entry = entries[key] if isinstance(key, str) else key
        if isinstance(entry, Skipped):
            skipped.append(entry)
            continue
        scan, funcs = entry
        scans.append(scan)
        functions += funcs
    if use_cache and (read or len(known) != len({k for _, k in order if isinstance(k, str)})):
        kept = {k: entries[k] for _, k in order if isinstance(k, str)}  # this tree's files now, no others
        cache.store_at(pack, pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL))
    files = len(scans)
    cached = sum(isinstance(k, str) and k in known for _, k in order)
    progress(
        f"read {files} files of {root} ({len(functions)} functions, {len(skipped)} skipped; {cached} from the cache)"
    )
    return Tree(scans, functions, files, skipped, cached)

"""What was judged of vLLM's names between two releases, kept for the next run over the same tree.

Judging (a name resolved at release A and at B and compared, an override's base looked up, a call or
a coupling's verdict) depends only on the two releases' files, what is asked (the name, the way it is
imported, what the tree's code passes) and this tool's judging code. So each answer is kept by what
was asked, in one pack per tree and release pair: under a folder named by the digest of the judging
code itself (and Python's version), by the digest of both releases' files, so an answer never
outlives the code or the files that gave it. A warm run asks the resolvers only what is new, and
parses no module of vLLM unless something reads a definition's statement (``Definition.node``), which
is then parsed from its module again.

The pack is a pickle checked by its sha256 sidecar, like every cache entry: a corrupted one is
dropped, never used. A git source's package is not kept (its files are read blob by blob, and the
commits found for each change come from the repository); ``BALANCE_PATCHGEN_NO_READ_CACHE`` (set to
anything but "") keeps nothing and reads nothing, as for the tree's own files.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import io
import os
import pickle
import sys
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from generator.errors import FileRefused
from generator.judge.couplings.tree_read import NO_CACHE_ENV
from generator.judge.couplings.upstream import Definition, Resolver
from generator.sources import cache
from generator.sources.package import Package

T = TypeVar("T")
_FOLDER = "couplings-judged"
_HERE = Path(__file__).resolve().parent
# The code whose answers are kept: every module of couplings (resolving, comparing, verdicts, signatures),
# census's reading (a copy's statement keys) and provenance (a copy's overlap), and the package reader.
_JUDGING = (
    *sorted(_HERE.glob("*.py")),
    *sorted((_HERE.parent / "census").glob("*.py")),
    _HERE.parent / "provenance.py",
    _HERE.parent.parent / "sources" / "package.py",
)


@functools.cache
def version() -> str:
    """The digest of the judging code and Python's version: a pack other code wrote is never read."""
    digest = hashlib.sha256(f"{sys.version_info[0]}.{sys.version_info[1]}".encode())
    for path in _JUDGING:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _files_digest(package: Package) -> str | None:
    """The digest of a release's files (None: not kept, a git source's)."""
    if package.origin == "git":
        return None
    digest = hashlib.sha256(package.label.encode() + b"\0")
    for path in sorted(package.paths):
        digest.update(path.encode() + b"\0" + (package.text(path) or "").encode() + b"\0")
    return digest.hexdigest()


class Judged:
    """Answers by what was asked: the pack's, and this run's (which the pack becomes)."""

    def __init__(self, root: Path | None, paths: Sequence[Path], a: Resolver, b: Resolver) -> None:
        self._resolvers = {b.label: b, a.label: a}  # the same label twice: the same files
        self._kept: dict[tuple[str, Hashable], Any] = {}
        self._now: dict[tuple[str, Hashable], Any] = {}
        self.hits = 0
        self.pack: Path | None = None
        if root is None or os.environ.get(NO_CACHE_ENV, ""):
            return
        old, new = _files_digest(a.package), _files_digest(b.package)
        if old is None or new is None:
            return
        where = "\0".join([old, new, str(root.resolve()), *map(str, paths)])
        self.pack = (
            cache.cache_root() / _FOLDER / version() / f"{hashlib.sha256(where.encode()).hexdigest()[:24]}.pickle"
        )
        self._kept = self._load(self.pack)

    def get(self, kind: str, key: Hashable, compute: Callable[[], T]) -> T:
        """The answer to ``kind`` asked of ``key``: kept, else computed (and kept for the next run)."""
        asked = (kind, key)
        if asked in self._now:
            return self._now[asked]
        if asked in self._kept:
            self.hits += 1
            value = self._kept[asked]
        else:
            value = compute()
        self._now[asked] = value
        return value

    def save(self) -> None:
        """Keep this run's answers (only them: what the tree no longer asks goes) when they differ from the pack's."""
        if self.pack is None or self._now.keys() == self._kept.keys():
            return
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.persistent_id = _persistent_id  # type: ignore[method-assign]
        try:
            pickler.dump(self._now)
        except (pickle.PicklingError, TypeError):
            return  # an answer that cannot be kept: asked again next time
        with contextlib.suppress(OSError, FileRefused):  # an unwritable cache: judged again next time
            cache.store_at(self.pack, buffer.getvalue())

    def _load(self, pack: Path) -> dict[tuple[str, Hashable], Any]:
        data = cache.load_at(pack)
        if data is None:
            return {}
        unpickler = pickle.Unpickler(io.BytesIO(data))
        unpickler.persistent_load = self._definition  # type: ignore[method-assign]
        try:
            found = unpickler.load()
        except Exception:  # a pack this code cannot read whole is no pack: everything is judged again
            return {}
        return found if isinstance(found, dict) else {}

    def _definition(self, pid: Any) -> Definition:
        """A kept definition, its node parsed from its module when first asked for."""
        tag, release, name, module, path, qualname, kind, span = pid
        resolver = self._resolvers.get(release)
        if tag != "definition" or resolver is None:
            raise pickle.UnpicklingError(f"a definition of {release!r}, not of this release pair")
        load = functools.partial(resolver.node_of, module, qualname)
        return Definition(name, module, path, qualname, kind, None, span, release, load if qualname else None)


def _persistent_id(obj: object) -> tuple[object, ...] | None:
    """A definition is kept as where it is (never its statement's tree); no other tree may be kept."""
    if isinstance(obj, Definition):
        return ("definition", obj.release, obj.name, obj.module, obj.path, obj.qualname, obj.kind, obj.span)
    if isinstance(obj, (ast.AST, Resolver, Package)):
        raise TypeError(f"a {type(obj).__name__} is not kept in the judgement cache")
    return None

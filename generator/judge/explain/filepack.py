"""What ``explain`` reads of a tree's files, kept in the cache by each file's digest.

A warm ``explain`` parses no file it read before: each reading (a file's outline, its classes' bases) is a
pure function of the file's bytes, so it is kept under the digest of those bytes, in one pack per tree and
reading. A file edited since is read again; a pack that cannot be read or written costs parsing, nothing
else.
"""

from __future__ import annotations

import contextlib
import hashlib
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from generator.sources import cache

T = TypeVar("T")
_KEPT = 8192  # readings a pack holds before the ones this run did not ask for are dropped


class FilePack(Generic[T]):
    """``read(bytes, path)`` of each file asked for (None: the file does not parse), by its digest."""

    def __init__(self, name: str, root: Path, read: Callable[[bytes, str], T | None]) -> None:
        self.root, self._read_one = root, read
        where = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
        self._pack = cache.cache_root() / name / f"{where}.pickle"
        self._by_path: dict[str, T | None] = {}
        self._known: dict[str, T | None] | None = None
        self._asked: set[str] = set()
        self.added = False

    def get(self, path: str) -> T | None:
        if path not in self._by_path:
            self._by_path[path] = self._read(path)
        return self._by_path[path]

    def _read(self, path: str) -> T | None:
        try:
            data = (self.root / path).read_bytes()
        except OSError:
            return None
        digest = hashlib.sha256(data).hexdigest()
        self._asked.add(digest)
        known = self._load()
        if digest not in known:
            known[digest] = self._read_one(data, path)
            self.added = True
        return known[digest]

    def _load(self) -> dict[str, T | None]:
        if self._known is None:
            self._known = {}
            data = cache.load_at(self._pack)
            if data is not None:
                with contextlib.suppress(Exception):  # a pack of other code: read again
                    found = pickle.loads(data)
                    if isinstance(found, dict):
                        self._known = found
        return self._known

    def save(self) -> None:
        """Keep what was read for the next run (past a bound, only what this run asked for)."""
        if not self.added:
            return
        known = self._load()
        if len(known) > _KEPT:
            known = {d: v for d, v in known.items() if d in self._asked}
        with contextlib.suppress(OSError):
            cache.store_at(self._pack, pickle.dumps(known, protocol=pickle.HIGHEST_PROTOCOL))
        self.added = False

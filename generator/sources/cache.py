"""On-disk cache of verified upstream files, under the user's cache directory.

A file enters the cache only after its source verified it; a sidecar holds its sha256 so that a
corrupted or hand-edited cache entry is detected on read and dropped, never used.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from generator.atomic import write_bytes_atomic


def cache_root() -> Path:
    if explicit := os.environ.get("BALANCE_PATCHGEN_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "balance-patchgen"


def _entry(tag: str) -> Path:
    return cache_root() / "upstream" / tag / "scheduler.py"


def load(tag: str) -> bytes | None:
    return load_at(_entry(tag))


def store(tag: str, data: bytes) -> None:
    store_at(_entry(tag), data)


def load_at(path: Path) -> bytes | None:
    """A verified entry at ``path`` (under ``cache_root()``), or None when absent or corrupted."""
    sidecar = path.with_suffix(".py.sha256")
    try:
        # Only regular files: a FIFO planted in the cache would block the read forever.
        if not (stat.S_ISREG(path.lstat().st_mode) and stat.S_ISREG(sidecar.lstat().st_mode)):
            return None
        data = path.read_bytes()
        expected = sidecar.read_bytes().decode("ascii", errors="replace").strip()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != expected:
        path.unlink(missing_ok=True)
        sidecar.unlink(missing_ok=True)
        return None
    return data


def store_at(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Data first, sidecar last: a crash in between leaves an entry that load() rejects.
    write_bytes_atomic(path, data)
    write_bytes_atomic(path.with_suffix(".py.sha256"), hashlib.sha256(data).hexdigest().encode() + b"\n")

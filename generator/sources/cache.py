"""On-disk cache of verified upstream files, under the user's cache directory.

A file enters the cache only after its source verified it; a sidecar holds its sha256 so that a
corrupted or hand-edited cache entry is detected on read and dropped, never used.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from generator.atomic import write_bytes_atomic
from generator.errors import UsageError
from generator.sources.base import UPSTREAM_PATH

# A file of vLLM's package, as a wheel names it: only such paths become cache entries.
_MEMBER = re.compile(r"vllm(?:/[A-Za-z0-9_][A-Za-z0-9_.-]*)*/[A-Za-z0-9_][A-Za-z0-9_.-]*\.py")


def cache_root() -> Path:
    if explicit := os.environ.get("BALANCE_PATCHGEN_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "balance-patchgen"


def _entry(tag: str, path: str = UPSTREAM_PATH) -> Path:
    if path == UPSTREAM_PATH:
        return cache_root() / "upstream" / tag / "scheduler.py"
    if _MEMBER.fullmatch(path) is None:
        raise UsageError(f"{path!r} is not a file of vLLM's package (vllm/.../name.py): it cannot be cached")
    return cache_root() / "upstream" / tag / "files" / path


def load(tag: str, path: str = UPSTREAM_PATH) -> bytes | None:
    """The cached ``path`` (a file of vLLM's package) at ``tag``; ``scheduler.py`` by default."""
    return load_at(_entry(tag, path))


def store(tag: str, data: bytes, path: str = UPSTREAM_PATH) -> None:
    store_at(_entry(tag, path), data)


def _members_entry(tag: str) -> Path:
    return cache_root() / "upstream" / tag / "members"


def load_members(tag: str) -> frozenset[str] | None:
    """The ``.py`` files of vLLM's package in ``tag``'s wheel (as its zip directory lists them), if cached.

    Lets a reader say a release has no such file without opening the wheel again.
    """
    data = load_at(_members_entry(tag))
    return None if data is None else frozenset(data.decode("utf-8", errors="replace").splitlines())


def store_members(tag: str, names: Iterable[str]) -> None:
    store_at(_members_entry(tag), "".join(f"{n}\n" for n in sorted(set(names))).encode())


def _package_entry(tag: str) -> Path:
    return cache_root() / "upstream" / tag / "package.zip"


def load_package(tag: str) -> bytes | None:
    """The zip of every ``.py`` file of vLLM's package at ``tag`` (``sources.package``), if cached."""
    return load_at(_package_entry(tag))


def store_package(tag: str, data: bytes) -> None:
    store_at(_package_entry(tag), data)


def load_at(path: Path) -> bytes | None:
    """A verified entry at ``path`` (under ``cache_root()``), or None when absent or corrupted."""
    sidecar = _sidecar(path)
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
    write_bytes_atomic(_sidecar(path), hashlib.sha256(data).hexdigest().encode() + b"\n")


def _sidecar(path: Path) -> Path:
    # ``scheduler.py.sha256`` as ever; any other name gets ``.sha256`` after its own (``package.zip.sha256``).
    return path.with_suffix(".py.sha256") if path.suffix == ".py" else path.with_name(f"{path.name}.sha256")

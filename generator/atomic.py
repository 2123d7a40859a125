"""Atomic file replacement: readers see the old bytes or the new bytes, never a mix."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _stage(path: Path, data: bytes) -> str:
    """Write ``data`` to a temp file beside ``path`` (same filesystem, so rename is atomic)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def write_all_or_nothing(files: dict[Path, bytes]) -> None:
    """Replace several files so that a failure leaves every one of them as it was.

    Every new content is staged next to its target first; only when all are staged are they
    renamed into place, and if a rename fails the ones already renamed are put back.
    """
    staged: list[tuple[Path, str]] = []
    replaced: list[tuple[Path, bytes | None]] = []
    try:
        for path, data in files.items():
            staged.append((path, _stage(path, data)))
        for path, tmp in staged:
            old = path.read_bytes() if path.exists() else None
            os.replace(tmp, path)
            replaced.append((path, old))
    except BaseException:
        for path, old in reversed(replaced):
            if old is None:
                path.unlink(missing_ok=True)
            else:
                os.replace(_stage(path, old), path)
        for _, tmp in staged:
            Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: Path, data: bytes) -> None:
    write_all_or_nothing({path: data})

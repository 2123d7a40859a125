"""Atomic file replacement: readers see the old bytes or the new bytes, never a mix."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from generator.errors import FileRefused


def require_regular_or_absent(path: Path, *, what: str) -> None:
    """Refuse, before any read, a path that is not a regular file (or absent).

    Reading a device or FIFO never ends (``/dev/zero``) or blocks (a FIFO), and renaming over it
    replaces the device node (``/dev/null``) or a symlink instead of the file it points to.
    """
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise FileRefused(f"{what} {path} is a symbolic link: pass the path of the real file")
    if not stat.S_ISREG(mode):
        raise FileRefused(f"{what} {path} is not a regular file: pass the path of a generated module")


def is_same_file(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def _stage(path: Path, data: bytes) -> str:
    """Write ``data`` to a temp file beside ``path`` (same filesystem, so rename is atomic)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:
            # A failed write() names no file ("No space left on device"): name the one being written.
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def write_all_or_nothing(files: dict[Path, bytes]) -> None:
    """Replace several files so that a failure leaves every one of them as it was.

    Every new content is staged next to its target first; only when all are staged are they
    renamed into place, and if a rename fails the ones already renamed are put back. Renames run
    in the order given: a SIGKILL between two leaves the earlier ones done and cannot be rolled
    back, so a caller puts the file that commits to the change (e.g. the pin) last.
    """
    for path in files:
        require_regular_or_absent(path, what="output")
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

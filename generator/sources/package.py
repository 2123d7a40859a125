"""vLLM's whole Python package at a release or a git ref: what ``couplings``, ``impact`` and ``census`` read.

A release comes from its wheel on the package index: every ``vllm/**/*.py`` member (about 2,700 files,
11 MB of a 300 MB wheel at v0.30.0) in a handful of range reads, since the members lie together in the
zip and neighbours closer than ``GAP`` are read as one span; each member is checked against the
wheel's RECORD and its CRC, and the set is kept in the cache as one zip per release, so a release once
read is read offline. A git ref is the tree at its commit (blobs read when asked for). A folder
(``--vllm-source``) is read as it is. Every kind gives the same bytes for the same release.
"""

from __future__ import annotations

import io
import itertools
import os
import zipfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from generator.errors import FileRefused, SourceUnavailable, UsageError
from generator.sources import cache
from generator.sources.base import Progress, no_progress
from generator.sources.release import open_wheel
from generator.tags import is_release_tag

# Members closer than this in the wheel are read as one range: the bytes between cost less than a request.
GAP = 1 << 20
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the cache zip's bytes do not depend on when it was written


@dataclass
class Package:
    """The ``.py`` files of vLLM's package (``vllm/...``) at one release or ref."""

    label: str  # the tag, or ``branch@commit12``
    origin: str  # release | cache | git | folder
    paths: frozenset[str]
    _read: Callable[[str], bytes | None] = field(repr=False)
    _texts: dict[str, str | None] = field(default_factory=dict, repr=False)
    _lines: dict[str, list[str]] = field(default_factory=dict, repr=False)

    def text(self, path: str) -> str | None:
        """The file's text (None: the package has no such file); read once."""
        if path not in self._texts:
            data = self._read(path) if path in self.paths else None
            self._texts[path] = None if data is None else data.decode("utf-8", errors="replace")
        return self._texts[path]

    def lines(self, path: str) -> list[str]:
        """The file's lines, ends kept ([] when the package has no such file); split once."""
        if path not in self._lines:
            self._lines[path] = (self.text(path) or "").splitlines(keepends=True)
        return self._lines[path]

    def module_path(self, module: str) -> str | None:
        """``vllm.a.b`` -> ``vllm/a/b.py`` or ``vllm/a/b/__init__.py``, whichever the package has."""
        base = module.replace(".", "/")
        for path in (f"{base}.py", f"{base}/__init__.py"):
            if path in self.paths:
                return path
        return None


def from_members(label: str, origin: str, members: dict[str, bytes]) -> Package:
    return Package(label, origin, frozenset(members), members.get)


def release(tag: str, progress: Progress = no_progress, *, refresh: bool = False) -> Package:
    """Release ``tag``'s package: from the cache, else its wheel (then cached)."""
    if not refresh and (cached := cache.load_package(tag)) is not None:
        return from_members(tag, "cache", _unzip(cached, tag))
    members = _from_wheel(tag, progress)
    try:
        cache.store_package(tag, _zip(members))
    except (OSError, FileRefused) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        progress(f"warning: cannot write the cache in {cache.cache_root()} ({reason}): continuing without it")
    return from_members(tag, "release", members)


def _from_wheel(tag: str, progress: Progress) -> dict[str, bytes]:
    with open_wheel(tag) as opened:
        infos = sorted(opened.archive.infolist(), key=lambda i: i.header_offset)
        wanted = [i for i in infos if i.filename.startswith("vllm/") and i.filename.endswith(".py")]
        spans = _spans(infos, wanted, opened.archive.start_dir)
        progress(
            f"fetching vLLM {tag}'s {len(wanted)} Python files from {opened.wheel.filename} "
            f"({sum(e - s for s, e in spans) / 1e6:.1f} MB in {len(spans)} range reads)"
        )
        opened.reader.prefetch(spans)
        members = {i.filename: opened.read(i) for i in wanted}
    progress(f"fetched {opened.reader.downloaded} bytes of {opened.wheel.size or '?'}")
    return members


def _spans(infos: list[zipfile.ZipInfo], wanted: Iterable[zipfile.ZipInfo], end: int) -> list[tuple[int, int]]:
    """Byte ranges covering each wanted member (local header to the next member's), neighbours merged."""
    following = {id(a): b.header_offset for a, b in itertools.pairwise(infos)}
    spans: list[list[int]] = []
    for info in wanted:
        start, stop = info.header_offset, following.get(id(info), end)
        if spans and start - spans[-1][1] <= GAP:
            spans[-1][1] = max(spans[-1][1], stop)
        else:
            spans.append([start, stop])
    return [(s, e) for s, e in spans]


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(members):
            archive.writestr(zipfile.ZipInfo(path, _ZIP_DATE), members[path], zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def _unzip(data: bytes, tag: str) -> dict[str, bytes]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return {name: archive.read(name) for name in archive.namelist()}
    except (zipfile.BadZipFile, zlib.error, EOFError, KeyError) as exc:
        raise SourceUnavailable(
            f"the cached package of vLLM {tag} is unreadable ({exc}): run again with --refresh"
        ) from None


def git_ref(name: str, location: str, progress: Progress = no_progress) -> Package:
    """The package at a release tag or a branch/commit of the repository at ``location``."""
    from generator.sources import git  # gitpython costs ~40 ms to import: only when used

    if is_release_tag(name):
        label, commit = name, git.tag_commit(name, location, progress)
    else:
        label, commit = git.ref_commit(name, location, progress)
    blobs = git.python_files(commit)
    if not blobs:
        raise SourceUnavailable(f"{label} in {location} has no vllm/ package: is it a vLLM repository?")

    def read(path: str) -> bytes | None:
        blob = blobs.get(path)
        return None if blob is None else bytes(blob.data_stream.read())

    return Package(label, "git", frozenset(blobs), read)


def folder(path: Path, label: str) -> Package:
    """A vLLM source tree on disk: its ``vllm/`` package folder, or a folder holding it."""
    package = path / "vllm" if (path / "vllm" / "__init__.py").is_file() else path
    if package.name != "vllm" or not (package / "__init__.py").is_file():
        raise UsageError(
            f"--vllm-source {path} is neither vLLM's package folder (vllm/ with __init__.py) nor a folder holding it"
        )
    root = package.parent
    paths: set[str] = set()
    for where, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        paths.update((Path(where) / f).relative_to(root).as_posix() for f in files if f.endswith(".py"))

    def read(rel: str) -> bytes | None:
        try:
            return (root / rel).read_bytes()
        except OSError:
            return None

    return Package(label, "folder", frozenset(paths), read)

"""vllm-ascend's released hand copies of ``schedule()``, read from the package index (for ``make history``).

A release's wheel is read member-wise by range requests, like vLLM's in ``release.py`` (checked
against the wheel's RECORD and the zip CRC). A release published only as an sdist is a gzip
stream, which cannot be read from the middle: the whole file is fetched and held to the sha256 the
index publishes, then the one member is read. Each copy is cached under the cache root; nothing
from vllm-ascend is ever written into the repository.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from generator.errors import FileRefused, SourceUnavailable
from generator.sources import cache, index
from generator.sources.base import Progress, matches_record, no_progress
from generator.tags import VersionKey
from generator.tags import version_key as tag_version_key

PROJECT = "vllm-ascend"
MEMBER = "vllm_ascend/patch/platform/patch_balance_schedule.py"
# The first release that shipped the patch; older ones are not read.
FIRST = "0.13.0rc1"

_WHEEL = re.compile(r"^vllm_ascend-(?P<version>[^-]+)-.+\.whl$")
_SDIST = re.compile(r"^vllm_ascend-(?P<version>[^-]+)\.tar\.gz$")
_VERSION = re.compile(r"^(?P<base>\d+\.\d+\.\d+)(?:(?P<pre>rc|a|b)(?P<n>\d+))?(?:\.post(?P<post>\d+))?$")


def version_key(version: str) -> VersionKey:
    """Release order (vLLM's own) for the versions vllm-ascend uses: X.Y.Z, X.Y.ZrcN, X.Y.Z.postN."""
    if _VERSION.match(version) is None:
        raise SourceUnavailable(f"vllm-ascend version {version!r} has a shape this reader does not know")
    return tag_version_key(version)


def vllm_tag(version: str) -> str:
    """The vLLM release a vllm-ascend release runs with: X.Y.Z[rcN][.postN] pairs with vX.Y.Z."""
    match = _VERSION.match(version)
    if match is None:
        raise SourceUnavailable(f"vllm-ascend version {version!r} has a shape this reader does not know")
    return f"v{match['base']}"


@dataclass(frozen=True)
class Artifact:
    version: str
    file: index.IndexFile
    kind: str  # "wheel" or "sdist"


def artifacts(files: list[index.IndexFile], since: str = FIRST) -> list[Artifact]:
    """One artifact per release from ``since`` on, oldest first: its first wheel by name, else its sdist."""
    floor = version_key(since)
    wheels: dict[str, list[index.IndexFile]] = {}
    sdists: dict[str, index.IndexFile] = {}
    for f in files:
        if (m := _WHEEL.match(f.filename)) is not None:
            wheels.setdefault(m["version"], []).append(f)
        elif (m := _SDIST.match(f.filename)) is not None:
            sdists[m["version"]] = f
    out = []
    for version in {*wheels, *sdists}:
        if _VERSION.match(version) is None or version_key(version) < floor:
            continue
        if version in wheels:
            # Every wheel of a release carries the same pure-Python file; sorting makes the pick stable.
            out.append(Artifact(version, sorted(wheels[version], key=lambda f: f.filename)[0], "wheel"))
        else:
            out.append(Artifact(version, sdists[version], "sdist"))
    return sorted(out, key=lambda a: version_key(a.version))


def _cached(version: str) -> Path:
    return cache.cache_root() / PROJECT / version / "patch_balance_schedule.py"


def fetch(artifact: Artifact, progress: Progress = no_progress) -> bytes | None:
    """The copy the release ships, or None when it ships none. Cached after the first read."""
    path = _cached(artifact.version)
    if (data := cache.load_at(path)) is not None:
        return data
    progress(f"reading {MEMBER} from {artifact.file.filename}")
    data = _from_wheel(artifact.file) if artifact.kind == "wheel" else _from_sdist(artifact.file)
    if data is not None:
        try:
            cache.store_at(path, data)
        except (OSError, FileRefused) as exc:  # the read was checked: losing the cache only costs the next run
            progress(f"warning: cannot write the cache in {cache.cache_root()} ({exc})")
    return data


def _from_wheel(wheel: index.IndexFile) -> bytes | None:
    reader = index.RangeReader(wheel.url, wheel.size, sha256=wheel.sha256)
    try:
        with zipfile.ZipFile(reader) as archive:
            names = set(archive.namelist())
            if MEMBER not in names:
                return None
            data = archive.read(MEMBER)  # zipfile checks the member's CRC-32
            records = [n for n in names if n.endswith(".dist-info/RECORD")]
            record = archive.read(records[0]) if len(records) == 1 else b""
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise SourceUnavailable(
            f"{wheel.filename} is not a readable wheel ({type(exc).__name__}: {exc}): retry later"
        ) from None
    if not matches_record(record, MEMBER, data):
        raise SourceUnavailable(
            f"{MEMBER} in {wheel.filename} does not match the wheel's RECORD hash: "
            "the download is corrupt or tampered with; retry"
        )
    return data


def _from_sdist(sdist: index.IndexFile) -> bytes | None:
    if sdist.sha256 is None:
        raise SourceUnavailable(f"the package index publishes no sha256 for {sdist.filename}: it cannot be checked")
    reader = index.RangeReader(sdist.url, sdist.size, sha256=sdist.sha256)
    body = reader.read()
    if hashlib.sha256(body).hexdigest() != sdist.sha256:
        raise SourceUnavailable(
            f"{sdist.filename} does not match the sha256 the package index publishes for it: "
            "the download is corrupt or tampered with; retry"
        )
    try:
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
            for member in tar:
                # sdists hold one top-level folder, <name>-<version>/
                if member.isfile() and member.name.split("/", 1)[-1] == MEMBER:
                    handle = tar.extractfile(member)
                    return handle.read() if handle is not None else None
    except (tarfile.TarError, zlib.error, EOFError) as exc:
        raise SourceUnavailable(
            f"{sdist.filename} is not a readable sdist ({type(exc).__name__}): retry later"
        ) from None
    return None

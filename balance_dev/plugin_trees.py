"""vLLM plugins' published source trees (their sdists on the package index), fetched at test time and cached.

Nothing of a plugin is kept in this repository: the sdist is read from the index pip is configured
with, held to the sha256 the index publishes, kept in the user's cache, and unpacked where the caller
says. Used by ``make downstream`` (vllm-ascend's tree and tests) and by the couplings tests.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import sys
import tarfile
import zipfile
from pathlib import Path

from generator.sources import cache, index

SDIST_TIMEOUT_S = 600.0  # tens of MB in one read; the index module's 60 s default is sized for range reads


class TreeUnavailable(Exception):
    """The sdist is not on the index, or does not match the sha256 the index publishes."""


def _say(message: str) -> None:
    print(f"plugin-trees: {message}", file=sys.stderr)


def _deadline() -> index.Deadline:
    if os.environ.get(index.FETCH_TIMEOUT_ENV, "").strip():
        return index.Deadline.from_env()
    return index.Deadline(SDIST_TIMEOUT_S)


def sdist_name(project: str, version: str) -> str:
    """``vllm-ascend`` 0.30.0rc2 -> ``vllm_ascend-0.30.0rc2.tar.gz`` (the sdist's normalized file name)."""
    return f"{project.replace('-', '_')}-{version}.tar.gz"


def sdist_bytes(project: str, version: str) -> bytes:
    """``project``'s sdist of ``version``, verified against the index's sha256 once, then from the cache."""
    return _published(project, version, sdist_name(project, version))


def _published(project: str, version: str, filename: str | None) -> bytes:
    """One file ``project`` publishes for ``version`` (None: its pure-Python wheel), checked, then cached."""
    listed = None
    if filename is None:
        listed = {f.filename: f for f in index.list_files(project)}
        filename = _wheel_name(project, version, listed)
    path = cache.cache_root() / project / version / filename
    if (data := cache.load_at(path)) is not None:
        return data
    listed = listed or {f.filename: f for f in index.list_files(project)}
    found = listed.get(filename)
    if found is None:
        raise TreeUnavailable(f"the package index has no {filename}: is {version} a {project} release?")
    if found.sha256 is None:
        raise TreeUnavailable(f"the package index publishes no sha256 for {filename}: it cannot be checked")
    _say(f"downloading {filename} ({(found.size or 0) / 1e6:.1f} MB)")
    data = index.RangeReader(found.url, found.size, deadline=_deadline(), sha256=found.sha256).read()
    if hashlib.sha256(data).hexdigest() != found.sha256:
        raise TreeUnavailable(f"{filename} does not match the sha256 the package index publishes for it: retry")
    cache.store_at(path, data)
    return data


def unpack(data: bytes, dest: Path) -> Path:
    """The sdist's tree, freshly unpacked under ``dest``: the one folder it holds."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        # "data": no member may land outside dest, be a device, or keep set-uid bits.
        tar.extractall(dest, filter="data")
    (tree,) = [p for p in dest.iterdir() if p.is_dir()]
    return tree


def _wheel_name(project: str, version: str, listed: dict[str, index.IndexFile]) -> str:
    """The wheel a plugin that publishes no sdist is read from: pure Python, the newest CPython tag first."""
    prefix = f"{project.replace('-', '_')}-{version}-"
    wheels = sorted((n for n in listed if n.startswith(prefix) and n.endswith(".whl")), reverse=True)
    pure = [n for n in wheels if n.endswith("-none-any.whl")]
    if not pure:
        raise TreeUnavailable(f"{project} {version} publishes neither an sdist nor a pure-Python wheel")
    # cp39 < cp311 < cp310 as text: order by the number, so the newest Python's build is read
    return max(pure, key=lambda n: (len(n.split("-")[2]), n.split("-")[2]))


def unpack_wheel(data: bytes, dest: Path) -> Path:
    """A wheel's files (its packages; not its ``.dist-info``), freshly unpacked under ``dest/tree``."""
    if dest.exists():
        shutil.rmtree(dest)
    tree = dest / "tree"
    tree.mkdir(parents=True)
    with zipfile.ZipFile(io.BytesIO(data)) as wheel:
        for member in wheel.infolist():
            name = Path(member.filename)
            if member.is_dir() or name.is_absolute() or ".." in name.parts or ".dist-info" in name.parts[0]:
                continue
            target = tree / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(wheel.read(member))
    return tree


def tree(project: str, version: str, dest: Path) -> Path:
    """``project``'s tree at ``version``: its sdist, or, for a plugin that publishes only wheels, its wheel's files."""
    try:
        return unpack(sdist_bytes(project, version), dest)
    except TreeUnavailable:
        listed = {f.filename: f for f in index.list_files(project)}
        if sdist_name(project, version) in listed:
            raise
    return unpack_wheel(_published(project, version, None), dest)

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
    filename = sdist_name(project, version)
    path = cache.cache_root() / project / version / filename
    if (data := cache.load_at(path)) is not None:
        return data
    listed = {f.filename: f for f in index.list_files(project)}
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


def tree(project: str, version: str, dest: Path) -> Path:
    return unpack(sdist_bytes(project, version), dest)

"""Which vLLM releases the package index has, for ``matrix --since`` and ``bump --latest``."""

from __future__ import annotations

import re

from generator.pin import version_of
from generator.sources import index

# Final releases only (no rc/dev/post): those are the tags a pin can name.
_WHEEL = re.compile(r"^vllm-(\d+(?:\.\d+)*)-")
_VERSION = re.compile(r"(?P<release>\d+(?:\.\d+)*)(?:(?P<pre>a|b|rc)(?P<pre_n>\d+))?(?:\.post(?P<post>\d+))?")
_PRE_ORDER = {"a": 0, "b": 1, "rc": 2}

VersionKey = tuple[tuple[int, ...], tuple[int, int, int], int]


def version_key(version: str) -> VersionKey:
    """Release order of the versions a tag can name: 0.11.0rc1 < 0.11.0 < 0.11.0.post1 < 0.11.1."""
    match = _VERSION.fullmatch(version)
    if match is None:
        raise ValueError(f"not a release version: {version!r}")
    parts = tuple(int(p) for p in match["release"].split("."))
    release = parts + (0,) * (4 - len(parts))  # 0.24 == 0.24.0, as packaging has it
    pre = (0, _PRE_ORDER[match["pre"]], int(match["pre_n"])) if match["pre"] else (1, 0, 0)
    return release, pre, int(match["post"]) if match["post"] else -1


def released_tags(since: str) -> list[str]:
    """Every final vLLM release with a wheel on the configured index, from ``since`` on, oldest first."""
    floor = version_key(version_of(since))
    versions = {m.group(1) for f in index.list_files("vllm") if (m := _WHEEL.match(f.filename))}
    return [f"v{v}" for v in sorted(versions, key=version_key) if version_key(v) >= floor]


def newest_release(after: str) -> str | None:
    """The newest final release on the configured index if it is newer than ``after``, else None."""
    tags = released_tags(after)
    if tags and version_key(version_of(tags[-1])) > version_key(version_of(after)):
        return tags[-1]
    return None

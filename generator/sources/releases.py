"""Which vLLM releases the package index has, for ``matrix --since`` and ``bump --latest``."""

from __future__ import annotations

import re

from generator.sources import index
from generator.tags import version_key, version_of

# Final releases only (no rc/dev/post): those are the tags a pin can name.
_WHEEL = re.compile(r"^vllm-(\d+(?:\.\d+)*)-")


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

"""Which vLLM releases the package index has, for ``matrix --since``."""

from __future__ import annotations

import re

from generator.pin import version_of
from generator.sources import index

# Final releases only (no rc/dev/post): those are the tags a pin can name.
_WHEEL = re.compile(r"^vllm-(\d+(?:\.\d+)*)-")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def released_tags(since: str) -> list[str]:
    """Every final vLLM release with a wheel on the configured index, from ``since`` on, oldest first."""
    floor = _key(version_of(since))
    versions = {m.group(1) for f in index.list_files("vllm") if (m := _WHEEL.match(f.filename))}
    return [f"v{v}" for v in sorted(versions, key=_key) if _key(v) >= floor]

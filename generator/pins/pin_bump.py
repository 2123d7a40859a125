"""What a pin bump shows besides the new module: upstream's own ``schedule()`` diff, and the releases it spans."""

from __future__ import annotations

from generator.builder import extract
from generator.judge.check import unified_diff
from generator.sources.base import UpstreamFile
from generator.sources.releases import released_tags
from generator.tags import version_key, version_of


def method_diff(old: UpstreamFile, new: UpstreamFile) -> str:
    """Upstream ``Scheduler.schedule()`` from ``old`` to ``new`` as a unified diff ("" when identical)."""
    return unified_diff(_method_text(old), _method_text(new), f"schedule@{old.tag}", f"schedule@{new.tag}")


def _method_text(upstream: UpstreamFile) -> str:
    module = extract.parse(upstream.text, upstream.tag)
    return module.code_for_node(extract.extract(module, upstream.tag).method)


def releases_between(pinned: str, tag: str) -> list[str]:
    """The final releases on the package index from the pin up to ``tag``, and ``tag`` itself, oldest first."""
    ceiling = version_key(version_of(tag))
    tags = [t for t in released_tags(pinned) if version_key(version_of(t)) <= ceiling]
    return tags if tag in tags else [*tags, tag]

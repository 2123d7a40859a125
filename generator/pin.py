"""The pinned vLLM release tag: the single source of truth for which upstream we copy."""

from __future__ import annotations

import re
from pathlib import Path

from generator.errors import UsageError

PIN_FILE = Path(".github/vllm-release-tag.commit")

# A release tag as vLLM publishes them (v0.24.0, v0.10.1.1, v0.8.5.post1, v0.11.0rc1). Anything
# else could be a path, a refspec, an option or shell text, and the tag flows into git and URLs.
_TAG_RE = re.compile(r"v(?P<version>\d+(?:\.\d+){1,3}(?:(?:a|b|rc)\d+)?(?:\.post\d+)?)")


def validate_tag(tag: str, *, origin: str = "tag") -> str:
    """Return ``tag`` unchanged if it is a plain release tag; raise UsageError otherwise."""
    if not tag:
        raise UsageError(f"{origin} is empty: write a release tag such as v0.24.0 into it")
    if not _TAG_RE.fullmatch(tag):
        shown = tag if len(tag) <= 60 else tag[:57] + "..."
        raise UsageError(
            f"{origin} {shown!r} is not a plain vLLM release tag: use the form vMAJOR.MINOR.PATCH (e.g. v0.24.0)"
        )
    return tag


def version_of(tag: str) -> str:
    """The package version a release tag names (``v0.24.0`` -> ``0.24.0``)."""
    match = _TAG_RE.fullmatch(tag)
    if match is None:
        raise UsageError(f"{tag!r} is not a plain vLLM release tag")
    return match.group("version")


def read_pin(path: Path) -> str:
    """Read the pin exactly as CI does (``tr -d '[:space:]'``) and validate it."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"pin file {path} does not exist: create it with a tag such as v0.24.0") from None
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise UsageError(f"pin file {path} is not ASCII text: write a tag such as v0.24.0") from None
    tag = re.sub(r"[ \t\n\r\v\f]", "", text)
    return validate_tag(tag, origin=f"pin file {path}")

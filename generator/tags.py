"""What a vLLM release tag and a git ref look like, and the order of releases: string rules every stage uses.

A tag or ref flows into git commands, URLs, file names and messages, so each is held to the plain
shape vLLM gives it: never an option, a revision expression, a path escape or shell text. Reading
them from files is ``pins``'s job; listing the releases an index has is ``sources.releases``'s.
"""

from __future__ import annotations

import re

from generator.errors import UsageError

# A release tag as vLLM publishes them (v0.24.0, v0.10.1.1, v0.8.5.post1, v0.11.0rc1). Anything
# else could be a path, a refspec, an option or shell text, and the tag flows into git and URLs.
TAG_RE = re.compile(r"v(?P<version>\d+(?:\.\d+){1,3}(?:(?:a|b|rc)\d+)?(?:\.post\d+)?)")

_VERSION = re.compile(r"(?P<release>\d+(?:\.\d+)*)(?:(?P<pre>a|b|rc)(?P<pre_n>\d+))?(?:\.post(?P<post>\d+))?")
_PRE_ORDER = {"a": 0, "b": 1, "rc": 2}

_COMMIT_RE = re.compile(r"[0-9a-f]{7,40}")
# A branch name as `git check-ref-format --branch` accepts it, narrowed to what vLLM uses (main,
# releases/v0.25.0): no `..`, `@{`, `~`, `^`, `:`, spaces or a leading `-`.
_BRANCH_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")

VersionKey = tuple[tuple[int, ...], tuple[int, int, int], int]


def is_release_tag(name: str) -> bool:
    return TAG_RE.fullmatch(name) is not None


def validate_tag(tag: str, *, origin: str = "tag") -> str:
    """Return ``tag`` unchanged if it is a plain release tag; raise UsageError otherwise."""
    if not tag:
        raise UsageError(f"{origin} is empty: write a release tag such as v0.24.0 into it")
    if not TAG_RE.fullmatch(tag):
        shown = tag if len(tag) <= 60 else tag[:57] + "..."
        raise UsageError(
            f"{origin} {shown!r} is not a plain vLLM release tag: use the form vMAJOR.MINOR.PATCH (e.g. v0.24.0)"
        )
    return tag


def version_of(tag: str) -> str:
    """The package version a release tag names (``v0.24.0`` -> ``0.24.0``)."""
    match = TAG_RE.fullmatch(tag)
    if match is None:
        raise UsageError(f"{tag!r} is not a plain vLLM release tag")
    return match.group("version")


def version_key(version: str) -> VersionKey:
    """Release order of the versions a tag can name: 0.11.0rc1 < 0.11.0 < 0.11.0.post1 < 0.11.1."""
    match = _VERSION.fullmatch(version)
    if match is None:
        raise ValueError(f"not a release version: {version!r}")
    parts = tuple(int(p) for p in match["release"].split("."))
    release = parts + (0,) * (4 - len(parts))  # 0.24 == 0.24.0, as packaging has it
    pre = (0, _PRE_ORDER[match["pre"]], int(match["pre_n"])) if match["pre"] else (1, 0, 0)
    return release, pre, int(match["post"]) if match["post"] else -1


def tag_key(tag: str) -> VersionKey:
    """Release order of tags (``v0.24.0``)."""
    return version_key(version_of(tag))


def is_commit(name: str) -> bool:
    return _COMMIT_RE.fullmatch(name) is not None


def validate_ref(ref: str, *, origin: str = "ref") -> str:
    """Return ``ref`` unchanged if it is a plain branch name or commit id; raise UsageError otherwise."""
    plain = (
        _BRANCH_RE.fullmatch(ref) is not None
        and len(ref) <= 100
        and ".." not in ref
        and not ref.endswith((".", ".lock"))
        and "/." not in ref
    )
    if not plain:
        shown = ref if len(ref) <= 60 else ref[:57] + "..."
        raise UsageError(
            f"{origin} {shown!r} is neither a release tag nor a plain branch name or commit id: "
            "pass e.g. v0.24.0, main or a commit sha"
        )
    return ref

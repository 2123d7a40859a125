"""Git refs that ``matrix`` reads besides release tags: a branch (vLLM ``main``) or a commit.

Refs are an early warning only. The pin stays a release tag (the drift gate must be
reproducible), so ``regen``/``check``/``verify``/``bump`` never accept one; ``matrix`` does, and
only from a git source. A ref flows into git commands and messages, so it is held to the plain
shapes a branch name or a commit id has: never an option, a revision expression or a path escape.
"""

from __future__ import annotations

import re
from pathlib import Path

from generator.errors import UsageError
from generator.pin import read_commit_file

MAIN_VERIFIED_FILE = Path(".github/vllm-main-verified.commit")

_COMMIT_RE = re.compile(r"[0-9a-f]{7,40}")
# A branch name as `git check-ref-format --branch` accepts it, narrowed to what vLLM uses (main,
# releases/v0.25.0): no `..`, `@{`, `~`, `^`, `:`, spaces or a leading `-`.
_BRANCH_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")


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


def read_main_verified(path: Path) -> str:
    """The vLLM commit vllm-ascend's development lane runs (``.github/vllm-main-verified.commit``)."""
    sha = read_commit_file(path, what="main-verified file", example="a vLLM commit sha (40 hex digits)")
    if re.fullmatch(r"[0-9a-f]{40}", sha) is None:
        raise UsageError(
            f"main-verified file {path} does not hold a full vLLM commit sha: write the 40 hex digits of the commit"
        )
    return sha

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
from generator.pins.pin import read_commit_file

MAIN_VERIFIED_FILE = Path(".github/vllm-main-verified.commit")


def read_main_verified(path: Path) -> str:
    """The vLLM commit vllm-ascend's development lane runs (``.github/vllm-main-verified.commit``)."""
    sha = read_commit_file(path, what="main-verified file", example="a vLLM commit sha (40 hex digits)")
    if re.fullmatch(r"[0-9a-f]{40}", sha) is None:
        raise UsageError(
            f"main-verified file {path} does not hold a full vLLM commit sha: write the 40 hex digits of the commit"
        )
    return sha

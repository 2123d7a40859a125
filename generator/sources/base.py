"""What every source returns, and the upstream path they all read."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

UPSTREAM_PATH = "vllm/v1/core/sched/scheduler.py"

# Sources report slow steps (network fetches) through this; the CLI prints them on stderr.
Progress = Callable[[str], None]


def no_progress(_: str) -> None:
    return None


@dataclass(frozen=True)
class UpstreamFile:
    tag: str
    data: bytes
    # Which backend produced it. For messages only: it must never reach the generated output.
    origin: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")

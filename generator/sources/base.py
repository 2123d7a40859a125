"""What every source returns, and the upstream path they all read."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from collections.abc import Callable
from dataclasses import dataclass

from generator.errors import UpstreamShapeError

UPSTREAM_PATH = "vllm/v1/core/sched/scheduler.py"

# Sources report slow steps (network fetches) through this; the CLI prints them on stderr.
Progress = Callable[[str], None]


def record_digest(data: bytes) -> str:
    """A file's hash as a wheel's RECORD writes it (PEP 376/427): urlsafe base64, no padding."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def record_digests(record: bytes) -> dict[str, str]:
    """Every member's hash a wheel's RECORD lists (the last row naming a member wins, as in ``matches_record``)."""
    return {row[0]: row[1] for row in csv.reader(io.StringIO(record.decode("utf-8", errors="replace"))) if len(row) > 1}


def matches_record(record: bytes, member: str, data: bytes) -> bool:
    """Whether ``data`` has the hash a wheel's RECORD lists for ``member`` (its last row naming it)."""
    expected = None
    for row in csv.reader(io.StringIO(record.decode("utf-8", errors="replace"))):
        if row and row[0] == member:
            expected = row[1]
    return expected == record_digest(data)


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
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = self.data[: exc.start].count(b"\n") + 1
            raise UpstreamShapeError(
                f"upstream {UPSTREAM_PATH} at {self.tag} (from {self.origin}) is not UTF-8 text (line {line}): "
                "is the source a vLLM release?"
            ) from None

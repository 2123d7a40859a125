"""Small helpers shared by the benchmark scripts: timing of commands, medians, tables."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def time_command(argv: Sequence[str], *, runs: int, env: dict[str, str] | None = None) -> float:
    """Median wall seconds of ``runs`` runs of a command (each must succeed)."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=REPO, env=env, check=True, capture_output=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)

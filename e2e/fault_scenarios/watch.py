"""Watching a deployment under faults: the probe's view of each rank, waiting on it, and the processes left."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import client
from deployment import Deployment

from fault_scenarios.plan import GATE_SLACK_S


def held(p: dict[str, Any]) -> int:
    """Requests an engine core holds after its last step (running + waiting)."""
    return held_now(p["now"])


def held_now(now: dict[str, Any]) -> int:
    return int(now.get("running", 0)) + int(now.get("waiting", 0))


def frozen(probe: dict[str, Any]) -> dict[str, int]:
    return {rank: int(p["frozen_steps"]) for rank, p in sorted(probe.items())}


def gate_closed_now(probe: dict[str, Any]) -> bool:
    """The gate as the most recently scheduling rank last saw it (every rank gathers the same count)."""
    fresh = [p for p in probe.values() if p.get("t_schedule") is not None]
    if not fresh:
        return False
    p = max(fresh, key=lambda p: p["t_schedule"])
    return bool(p["gate_closed"]) and p["gate_closed"][-1][1] is None


def in_closed_gate(t: float, probe: dict[str, Any]) -> bool:
    """``t`` (``time.time()``) inside an interval in which a rank's gathered leader count was at the cap,
    or at most GATE_SLACK_S after one ended: the intervals are stamped at ``schedule()`` calls, and the
    client decides on a probe file up to one engine step old."""
    for p in probe.values():
        for start, end in p["gate_closed"]:
            if start <= t and (end is None or t <= end + GATE_SLACK_S):
                return True
    return False


async def wait_probe(d: Deployment, pred: Callable[[dict[str, Any]], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred(d.probe()):
        if time.monotonic() > deadline:
            raise client.ClientFailure(f"the probe never showed {what} in {timeout:.0f} s: {probe_now(d)}")
        await asyncio.sleep(0.02)


def probe_now(d: Deployment) -> dict[str, Any]:
    return {k: p["now"] for k, p in sorted(d.probe().items())}


def leftovers(d: Deployment) -> dict[str, list[str]]:
    """Tree -> its live processes as 'pid name (parent P): command line', for a failure to name."""
    out = {}
    for name, pids in d.alive().items():
        rows = []
        for pid, comm in sorted(pids.items()):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = f.read().rsplit(")", 1)[1].split()[1]
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            rows.append(f"{pid} {comm} (parent {ppid}): {cmd[:90]}")
        if rows:
            out[name] = rows
    return out

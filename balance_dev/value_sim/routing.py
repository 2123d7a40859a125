"""Which engine a new request goes to: vLLM's own DP load-balancing client code on a stub (``Router``), fed the
coordinator's publications as the client sees them (``Coordinator``), in the shape the installed vLLM keeps.
"""

from __future__ import annotations

import math
import random
from collections import Counter, deque
from collections.abc import Sequence
from functools import cache
from types import SimpleNamespace
from typing import Any

ROUTINGS = ("score", "rr", "random")
HEARTBEAT_S = 5.0  # coordinator.py: unchanged stats are re-published every 5000 ms


def engine_entry(waiting: int = 0, running: int = 0, kv_cache_usage: float = 0.0) -> list[int | float]:
    """One engine's counts as the coordinator keeps them and the client scores them.

    ``coordinator.py`` ``EngineState.request_counts`` of the installed vLLM gives the shape: ``[waiting,
    running]`` up to 0.24, ``[waiting, running, kv_cache_usage]`` from 0.27 (filled from the engine's
    ``SchedulerStats`` in that order). A shape this does not know fails here, not as a wrong score.
    """
    return [waiting, running, kv_cache_usage][: _entry_fields()]


@cache
def _entry_fields() -> int:
    from vllm.v1.engine.coordinator import EngineState

    fields = len(EngineState().request_counts)
    if fields not in (2, 3):
        raise RuntimeError(f"vLLM's EngineState.request_counts has {fields} fields; the simulator knows 2 or 3")
    return fields


def publication(scheduler: Any) -> list[int | float]:
    """What an engine publishes (core.py ``_maybe_publish_request_counts``), as the coordinator stores it."""
    running, waiting = scheduler.get_request_counts()  # scheduler.py: (running, waiting + held back)
    usage = scheduler.get_kv_cache_usage() if hasattr(scheduler, "get_kv_cache_usage") else 0.0
    return engine_entry(waiting, running, usage)


class Router:
    """Which engine a new request goes to. ``score`` is vLLM's own client code on a stub."""

    def __init__(self, mode: str, dp: int, rng: random.Random) -> None:
        if mode not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}")
        self.mode, self.dp, self.rng, self.next_rr = mode, dp, rng, 0
        # The attributes get_core_engine_for_request and process_engine_outputs read, as
        # core_client.py DPLBAsyncMPClient.__init__ sets them for one front-end (eng_start_index =
        # len(core_engines) * client_index // client_count = 0); engine_inflight is read from 0.27 on,
        # streaming_reqs from 0.33 on.
        self.client = SimpleNamespace(
            lb_engines=[engine_entry() for _ in range(dp)],
            client_count=1,
            eng_start_index=0,
            core_engines=list(range(dp)),
            reqs_in_flight={},
            engine_inflight=Counter(),
            streaming_reqs=set(),
        )

    def choose(self, request_id: str) -> int:
        if self.mode == "rr":
            self.next_rr = (self.next_rr + 1) % self.dp
            return (self.next_rr - 1) % self.dp
        if self.mode == "random":
            return self.rng.randrange(self.dp)
        from vllm.v1.engine.core_client import DPLBAsyncMPClient

        # resumable: 0.33's get_core_engine_for_request reads it (a resumable request keeps its engine).
        request = SimpleNamespace(request_id=request_id, data_parallel_rank=None, pooling_params=None, resumable=False)
        return int(DPLBAsyncMPClient.get_core_engine_for_request(self.client, request))  # type: ignore[arg-type]

    def snapshot(self, counts: Sequence[Sequence[int | float]]) -> None:
        """A coordinator publication: replaces the counts, and with them the local bumps."""
        self.client.lb_engines = [list(c) for c in counts]

    def finished(self, request_id: str) -> None:
        """vLLM's own ``DPLBAsyncMPClient.process_engine_outputs`` for an output finishing the request."""
        if self.mode != "score":
            return  # rr and random keep no per-request state
        from vllm.v1.engine.core_client import DPLBAsyncMPClient

        outputs = SimpleNamespace(finished_requests=[request_id])
        step = DPLBAsyncMPClient.process_engine_outputs(self.client, outputs)  # type: ignore[arg-type]
        try:  # a coroutine that awaits nothing: run it to its end without an event loop
            step.send(None)
        except StopIteration:
            return
        step.close()
        raise RuntimeError("vLLM's process_engine_outputs awaited something; the simulator cannot drive it")


class Coordinator:
    """The coordinator's publications as the client sees them, evaluated lazily at routing time.

    Engines publish their counts (``publication``) whenever they change (before and after each step);
    the coordinator publishes the latest counts at instants ``k * interval`` if any engine published
    since its last publication, else every 5 s. ``interval <= 0``: the client always sees the latest.
    """

    def __init__(self, interval_s: float, dp: int) -> None:
        self.interval_s = interval_s
        self.changes: deque[tuple[float, list[list[int | float]]]] = deque([(0.0, [engine_entry() for _ in range(dp)])])
        self.last_publication = 0.0

    def engines_published(self, t: float, counts: list[list[int | float]]) -> None:
        if counts != self.changes[-1][1]:
            self.changes.append((t, counts))

    def refresh(self, t: float, router: Router) -> None:
        if self.interval_s <= 0:
            router.snapshot(self.changes[-1][1])
            return
        instant = math.floor(t / self.interval_s) * self.interval_s
        if instant <= self.last_publication:
            return
        while len(self.changes) > 1 and self.changes[1][0] <= instant:
            self.changes.popleft()  # keep the latest change at or before the instant, and later ones
        changed_at, counts = self.changes[0]
        if changed_at > self.last_publication or instant - self.last_publication >= HEARTBEAT_S:
            router.snapshot(counts)
            self.last_publication = instant

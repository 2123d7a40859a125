"""Per engine-core process: what really ran, written to ``<dir>/rank<N>.json`` (test-only).

Wraps ``EngineCoreProc._process_engine_step`` (every engine-core class inherits it; the busy loop calls
it once per iteration, right before the scheduler's ``schedule()``). At that point the scheduler holds
exactly what ``schedule()`` will read: its waiting and running queues and the counts gathered over the
DP group after the previous step. A step counts as *frozen* when this rank had waiting requests and
room under its own cap (so upstream would admit), but the leader's gathered count had reached the cap
(so balance's gate says no).

The leader's count is ``scheduler.balance_leader_running`` when the runtime keeps it, else the max of
``scheduler.balance_queue`` (one CPU int tensor per rank). Neither exists with balance off.
"""

from __future__ import annotations

import json
import os
from typing import Any

_MARK = "_balance_e2e_probe"


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _leader_running(scheduler: Any) -> int | None:
    leader = getattr(scheduler, "balance_leader_running", None)
    if leader is not None:
        return int(leader)
    queue = getattr(scheduler, "balance_queue", None)
    if queue is None:
        return None
    return max(int(t.item()) for t in queue)


class Recorder:
    def __init__(self, engine: Any, out_dir: str) -> None:
        scheduler = engine.scheduler
        parallel = engine.vllm_config.parallel_config
        rank = getattr(engine, "dp_rank", None)
        self.rank = int(rank if rank is not None else parallel.data_parallel_rank)
        self.path = os.path.join(out_dir, f"rank{self.rank}.json")
        self.state: dict[str, Any] = {
            "dp_rank": self.rank,
            "pid": os.getpid(),
            "engine_core_class": _qualname(type(engine)),
            "engine_core_mro": [_qualname(c) for c in type(engine).__mro__],
            "scheduler_class": _qualname(type(scheduler)),
            "scheduler_mro": [_qualname(c) for c in type(scheduler).__mro__],
            "balance_enabled": getattr(scheduler, "_balance_enabled", None),
            "has_balance_queue": hasattr(scheduler, "balance_queue"),
            "max_num_running_reqs": scheduler.max_num_running_reqs,
            "steps": 0,
            "steps_with_waiting": 0,
            "frozen_steps": 0,
            "max_leader_running": None,
        }
        os.makedirs(out_dir, exist_ok=True)

    def before_step(self, engine: Any) -> None:
        scheduler = engine.scheduler
        state = self.state
        state["steps"] += 1
        waiting = len(scheduler.waiting)
        cap = scheduler.max_num_running_reqs
        leader = _leader_running(scheduler)
        if leader is not None:
            state["max_leader_running"] = max(leader, state["max_leader_running"] or 0)
        if waiting:
            state["steps_with_waiting"] += 1
            if leader is not None and leader >= cap and len(scheduler.running) < cap:
                state["frozen_steps"] += 1
        self._write()

    def _write(self) -> None:
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f)
        os.replace(tmp, self.path)


def install(out_dir: str) -> None:
    from vllm.v1.engine.core import EngineCoreProc

    original = EngineCoreProc._process_engine_step
    if getattr(original, _MARK, False):
        return

    def _process_engine_step(self: Any) -> bool:
        recorder = self.__dict__.get(_MARK)
        if recorder is None:
            recorder = self.__dict__[_MARK] = Recorder(self, out_dir)
        recorder.before_step(self)
        return original(self)

    setattr(_process_engine_step, _MARK, True)
    EngineCoreProc._process_engine_step = _process_engine_step  # type: ignore[method-assign]

"""Per engine-core process: what really ran, written to ``<dir>/rank<N>.json`` (test-only).

The first ``EngineCoreProc._process_engine_step`` of an engine core (every engine-core class
inherits it; the busy loop calls it once per iteration, right before ``schedule()``) records the
engine core's and its scheduler's classes, and wraps that scheduler's ``schedule()`` (on the
instance: the classes stay untouched). Around each ``schedule()`` call the wrapper reads what the
gate reads, the leader's count gathered over the DP group after the previous step, and sees which
requests the call admitted (new in ``running``). A call is *frozen* when this rank had waiting
requests and room under its own cap (upstream would admit) but the leader's count had reached the
cap (balance's gate says no). An admission while the leader was at the cap breaks the freeze: the
e2e requires none with balance on.

The leader's count is what the last gather stored on the scheduler instance
(``balance_leader_running``; the class default does not count): with balance off no gather runs and
there is none, with balance on every engine core must have one. The cap is upstream's:
``max_num_active_reqs`` where vLLM has it (0.31+), else ``max_num_running_reqs``.
"""

from __future__ import annotations

import json
import os
from typing import Any

_MARK = "_balance_e2e_probe"


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _leader_running(scheduler: Any) -> int | None:
    """The leader's count as the last gather left it; None until a gather reached this scheduler."""
    leader = scheduler.__dict__.get("balance_leader_running")
    return None if leader is None else int(leader)


def _cap(scheduler: Any) -> int:
    cap = getattr(scheduler, "max_num_active_reqs", None)
    return int(cap if cap is not None else scheduler.max_num_running_reqs)


class Recorder:
    def __init__(self, engine: Any, out_dir: str, shims: list[str]) -> None:
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
            "max_num_running_reqs": _cap(scheduler),
            "cpu_shims": shims,
            "steps": 0,
            "steps_with_waiting": 0,
            "frozen_steps": 0,
            "gathered": False,
            "max_leader_running": None,
            "admitted": [],
            "admitted_while_leader_at_cap": [],
        }
        os.makedirs(out_dir, exist_ok=True)
        original = scheduler.schedule

        def schedule(*args: Any, **kwargs: Any) -> Any:
            before = self.before_schedule(scheduler)
            out = original(*args, **kwargs)
            self.after_schedule(scheduler, before)
            return out

        scheduler.schedule = schedule

    def before_schedule(self, scheduler: Any) -> tuple[set[str], int | None]:
        state = self.state
        state["steps"] += 1
        cap = _cap(scheduler)
        leader = _leader_running(scheduler)
        if leader is not None:
            state["gathered"] = True
            state["max_leader_running"] = max(leader, state["max_leader_running"] or 0)
        if len(scheduler.waiting):
            state["steps_with_waiting"] += 1
            if leader is not None and leader >= cap and len(scheduler.running) < cap:
                state["frozen_steps"] += 1
        return {r.request_id for r in scheduler.running}, leader

    def after_schedule(self, scheduler: Any, before: tuple[set[str], int | None]) -> None:
        running_before, leader = before
        admitted = [r.request_id for r in scheduler.running if r.request_id not in running_before]
        self.state["admitted"].extend(admitted)
        if admitted and leader is not None and leader >= _cap(scheduler):
            self.state["admitted_while_leader_at_cap"].extend(admitted)
        self._write()

    def _write(self) -> None:
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f)
        os.replace(tmp, self.path)


def install(out_dir: str, shims: list[str]) -> None:
    from vllm.v1.engine.core import EngineCoreProc

    original = EngineCoreProc._process_engine_step
    if getattr(original, _MARK, False):
        return

    def _process_engine_step(self: Any) -> Any:
        if _MARK not in self.__dict__:
            self.__dict__[_MARK] = Recorder(self, out_dir, shims)
        return original(self)

    setattr(_process_engine_step, _MARK, True)
    EngineCoreProc._process_engine_step = _process_engine_step  # type: ignore[method-assign]

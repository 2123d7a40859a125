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

For the fault runs (``e2e/faults.py``) it also keeps, after every engine step, this rank's running and
waiting counts and the scheduler's pause state (``now``: what a drained or aborted rank is left with),
and the wall-clock (``time.time()``) intervals in which the gathered leader count was at the cap
(``gate_closed``: the gate closed, whether or not this rank had anything waiting), so a client on the
same host can tell whether its abort came while the gate was closed. ``BALANCE_E2E_PROBE_LEAN=1``
(the soak) keeps counts instead of the admitted ids and the last intervals only.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from balance_e2e_probe.engine_facts import cap_of, qualname, rank_of

# The gate intervals kept: every one of an e2e run; the soak (lean, ten minutes and more) the last ones only.
GATE_INTERVALS_KEPT = 20000
GATE_INTERVALS_KEPT_LEAN = 200


def _leader_running(scheduler: Any) -> int | None:
    """The leader's count as the last gather left it; None until a gather reached this scheduler."""
    leader = scheduler.__dict__.get("balance_leader_running")
    return None if leader is None else int(leader)


class Recorder:
    def __init__(self, engine: Any, out_dir: str, shims: list[str], *, lean: bool = False) -> None:
        scheduler = engine.scheduler
        self.lean = lean
        self.gate_intervals_kept = GATE_INTERVALS_KEPT_LEAN if lean else GATE_INTERVALS_KEPT
        self.rank = rank_of(engine)
        self.path = os.path.join(out_dir, f"rank{self.rank}.json")
        self.state: dict[str, Any] = {
            "dp_rank": self.rank,
            "pid": os.getpid(),
            "engine_core_class": qualname(type(engine)),
            "engine_core_mro": [qualname(c) for c in type(engine).__mro__],
            "scheduler_class": qualname(type(scheduler)),
            "scheduler_mro": [qualname(c) for c in type(scheduler).__mro__],
            "balance_enabled": getattr(scheduler, "_balance_enabled", None),
            "max_num_running_reqs": cap_of(scheduler),
            "cpu_shims": shims,
            "steps": 0,
            "steps_with_waiting": 0,
            "frozen_steps": 0,
            "gathered": False,
            "max_leader_running": None,
            "admitted": [],
            "admitted_count": 0,
            "admitted_while_leader_at_cap": [],
            "now": {"running": 0, "waiting": 0, "pause_state": 0, "t": time.time()},
            "gate_closed": [],  # [start, end or None] in time.time(), the leader count at the cap
            "gate_closings": 0,
            "t_schedule": None,  # time.time() of the last schedule() call
            "pause_states_seen": [],
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
        state["t_schedule"] = time.time()
        cap = cap_of(scheduler)
        leader = _leader_running(scheduler)
        if leader is not None:
            state["gathered"] = True
            state["max_leader_running"] = max(leader, state["max_leader_running"] or 0)
            self.gate(leader >= cap)
        if len(scheduler.waiting):
            state["steps_with_waiting"] += 1
            if leader is not None and leader >= cap and len(scheduler.running) < cap:
                state["frozen_steps"] += 1
        return {r.request_id for r in scheduler.running}, leader

    def after_schedule(self, scheduler: Any, before: tuple[set[str], int | None]) -> None:
        running_before, leader = before
        admitted = [r.request_id for r in scheduler.running if r.request_id not in running_before]
        self.state["admitted_count"] += len(admitted)
        if not self.lean:
            self.state["admitted"].extend(admitted)
        if admitted and leader is not None and leader >= cap_of(scheduler):
            self.state["admitted_while_leader_at_cap"].extend(admitted)
        self._write()

    def gate(self, closed: bool) -> None:
        intervals = self.state["gate_closed"]
        is_open = not intervals or intervals[-1][1] is not None
        if closed and is_open:
            self.state["gate_closings"] += 1
            intervals.append([time.time(), None])
            del intervals[: -self.gate_intervals_kept]
        elif not closed and not is_open:
            intervals[-1][1] = time.time()

    def after_step(self, scheduler: Any) -> None:
        """This rank's counts after an engine step (written when they change)."""
        pause = int(getattr(scheduler, "pause_state", 0) or 0)
        now = {
            "running": len(scheduler.running),
            "waiting": len(scheduler.waiting) + len(getattr(scheduler, "skipped_waiting", ())),
            "pause_state": pause,
        }
        if pause not in self.state["pause_states_seen"]:
            self.state["pause_states_seen"].append(pause)
        if any(self.state["now"][k] != v for k, v in now.items()):
            self.state["now"] = {**now, "t": time.time()}
            self._write()

    def _write(self) -> None:
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f)
        os.replace(tmp, self.path)

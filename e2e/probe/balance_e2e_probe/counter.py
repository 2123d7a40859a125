"""The serving benchmark's probe (``BALANCE_E2E_PROBE_MODE=count``): counts and times, written when idle.

The e2e recorder rewrites its whole JSON state after every ``schedule()``, and with balance on its
gate-interval list grows, so its own cost differs on and off. This one keeps integers only, adds the
same few clock reads per step on and off, and writes ``rank<N>.json`` once when the engine core goes
idle (its busy loop is about to block for input) and at its first step, never per step.

Per engine core: ``steps`` (``schedule()`` calls), ``iterations`` (busy-loop iterations that reached
the cross-rank sync: steps plus dummy batches), ``dummy`` (dummy batches), ``frozen_steps`` (as the
recorder counts them), and wall nanoseconds inside ``_process_engine_step`` (the step), ``schedule()``
(the gate is in it), ``_has_global_unfinished_reqs`` (upstream's sync plus balance's gather) and
``balance_gather()`` alone, whose thread CPU time is kept too (its own work, without the wait).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from balance_e2e_probe.engine_facts import cap_of, qualname, rank_of

# What each engine core counts: benchmarks/serve.py reads these keys back.
COUNTS = (
    "steps",
    "iterations",
    "dummy",
    "frozen_steps",
    "gathers",
    "step_ns",
    "schedule_ns",
    "sync_ns",
    "gather_ns",
    "gather_cpu_ns",
    "dummy_ns",
)


class Counter:
    def __init__(self, engine: Any, out_dir: str, shims: list[str]) -> None:
        scheduler = engine.scheduler
        self.rank = rank_of(engine)
        self.path = os.path.join(out_dir, f"rank{self.rank}.json")
        self.c = dict.fromkeys(COUNTS, 0)
        self.info: dict[str, Any] = {
            "dp_rank": self.rank,
            "pid": os.getpid(),
            "engine_core_class": qualname(type(engine)),
            "scheduler_class": qualname(type(scheduler)),
            "balance_enabled": getattr(scheduler, "_balance_enabled", None),
            "max_num_running_reqs": cap_of(scheduler),
            "cpu_shims": shims,
            "mode": "count",
        }
        self.writes = 0
        self.dirty = True
        os.makedirs(out_dir, exist_ok=True)
        c = self.c
        clock = time.perf_counter_ns
        cap = cap_of(scheduler)

        schedule = scheduler.schedule

        def timed_schedule(*args: Any, **kwargs: Any) -> Any:
            c["steps"] += 1
            leader = scheduler.__dict__.get("balance_leader_running")
            if leader is not None and leader >= cap and scheduler.waiting and len(scheduler.running) < cap:
                c["frozen_steps"] += 1
            t = clock()
            out = schedule(*args, **kwargs)
            c["schedule_ns"] += clock() - t
            return out

        scheduler.schedule = timed_schedule

        gather = getattr(scheduler, "balance_gather", None)
        if gather is not None:
            cpu = time.thread_time_ns

            def timed_gather() -> None:
                t, tc = clock(), cpu()
                gather()
                c["gather_cpu_ns"] += cpu() - tc
                c["gather_ns"] += clock() - t
                c["gathers"] += 1

            scheduler.balance_gather = timed_gather

        sync = engine._has_global_unfinished_reqs

        def timed_sync(local_unfinished: bool) -> bool:
            c["iterations"] += 1
            t = clock()
            out = sync(local_unfinished)
            c["sync_ns"] += clock() - t
            self.dirty = True
            return bool(out)

        engine._has_global_unfinished_reqs = timed_sync

        dummy = engine.execute_dummy_batch

        def timed_dummy(*args: Any, **kwargs: Any) -> Any:
            c["dummy"] += 1
            t = clock()
            out = dummy(*args, **kwargs)
            c["dummy_ns"] += clock() - t
            return out

        engine.execute_dummy_batch = timed_dummy

        step = type(engine)._process_engine_step

        def timed_step() -> Any:
            t = clock()
            out = step(engine)
            c["step_ns"] += clock() - t
            return out

        # On the instance: the class-level wrapper that built this counter is not called again.
        engine._process_engine_step = timed_step

        poll = engine._process_input_queue
        has_work = getattr(engine, "has_work", None)

        def process_input_queue() -> Any:
            # About to block for input: the engine is idle, the counts are final for this wave.
            if self.dirty and has_work is not None and not has_work():
                self.write(idle=True)
            return poll()

        engine._process_input_queue = process_input_queue
        self.samples: dict[str, int] = {}
        if hz := float(os.environ.get("BALANCE_E2E_PROBE_SAMPLE_HZ", "0") or 0):
            threading.Thread(target=self.sample, args=(threading.get_ident(), 1.0 / hz), daemon=True).start()
        self.write(idle=False)

    def sample(self, main: int, period: float) -> None:
        """Profiling runs only: the main thread's Python stack, collapsed, ``period`` apart (wall, not CPU)."""
        while True:
            time.sleep(period)
            frame = sys._current_frames().get(main)
            names = []
            while frame is not None:
                code = frame.f_code
                names.append(f"{os.path.basename(code.co_filename)}:{code.co_name}")
                frame = frame.f_back
            key = ";".join(reversed(names))
            self.samples[key] = self.samples.get(key, 0) + 1

    def write(self, idle: bool) -> None:
        self.writes += 1
        self.dirty = False
        state = {**self.info, **self.c, "idle": idle, "writes": self.writes, "t_write": time.time()}
        if self.samples:
            state["samples"] = dict(self.samples)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, self.path)

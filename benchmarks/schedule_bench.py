"""``schedule()`` per step on real vLLM objects: upstream vs the generated BalanceScheduler with
balance off, on with the gate open, and on with the gate closed, across DP sizes (the length of
``balance_queue``) and waiting-queue depths. Same request stream for every variant. The gate reads
one number (the leader's count, reduced once per gather), so DP size should not show here."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from balance_dev import vllm_objects as vo
from benchmarks.common import table

CAP = 256
DP_SIZES = (2, 8, 32, 128)
WAITING = (0, 256, 4096)
RUNNING = 128  # requests already decoding when the measurement starts
STEPS = 60
ROUNDS = 5


def _scheduler(cls: type, enabled: bool | None, dp: int, gate_closed: bool) -> Any:
    extra = vo.balance_config(enabled) if enabled is not None else None
    config = vo.make_vllm_config(max_num_seqs=CAP, max_num_batched_tokens=4096, additional_config=extra)
    scheduler = vo.make_scheduler(cls, config, num_blocks=65536)
    if enabled:
        scheduler.balance_queue = [torch.tensor([0], dtype=torch.int) for _ in range(dp)]
        # Open: the leader one below the cap (the gate is evaluated, and lets through); closed: at it.
        scheduler.balance_queue[-1].fill_(CAP if gate_closed else CAP - 1)
        scheduler.balance_leader_running = max(int(t.item()) for t in scheduler.balance_queue)
    return scheduler


def _per_step_us(make: Callable[[], Any], waiting: int) -> tuple[float, float]:
    """Mean schedule() time over STEPS steps, after RUNNING requests reached decode.

    Requests are short (deterministic lengths), so some finish every step and waiting ones are
    admitted every step: the gate expression runs once per admitted request, as in a busy server.
    """
    scheduler = make()
    for i in range(RUNNING):
        scheduler.add_request(vo.make_request(f"run{i}", 32, 16 + i % 48))
    leader = getattr(scheduler, "balance_leader_running", None)
    if leader is not None:  # let the warm-up admit, then restore the gate for the measured steps
        scheduler.balance_leader_running = 0
    while len(scheduler.running) < RUNNING:
        out = scheduler.schedule()
        scheduler.update_from_output(out, vo.fake_model_output(out, scheduler))
    if leader is not None:
        scheduler.balance_leader_running = leader
    for i in range(waiting):
        scheduler.add_request(vo.make_request(f"wait{i}", 32, 4 + i % 48))
    samples = []
    admitted = 0
    for _ in range(STEPS):
        start = time.perf_counter_ns()
        out = scheduler.schedule()
        samples.append(time.perf_counter_ns() - start)
        admitted += len(out.scheduled_new_reqs)
        scheduler.update_from_output(out, vo.fake_model_output(out, scheduler))
    return statistics.fmean(samples) / 1000, admitted / STEPS


def _rows_for(waiting: int, upstream_cls: type, balance_cls: type) -> list[list[object]]:
    # Rounds interleave the variants so drift in machine load hits them alike.
    variants: list[tuple[str, Callable[[], Any]]] = [
        ("upstream", partial(_scheduler, upstream_cls, None, 1, False)),
        ("balance off", partial(_scheduler, balance_cls, False, 1, False)),
    ]
    for dp in DP_SIZES:
        variants.append((f"on, open, DP {dp}", partial(_scheduler, balance_cls, True, dp, False)))
        variants.append((f"on, closed, DP {dp}", partial(_scheduler, balance_cls, True, dp, True)))
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    admitted: dict[str, float] = {}
    for _ in range(ROUNDS):
        for name, make in variants:
            us, admitted[name] = _per_step_us(make, waiting)
            times[name].append(us)
    base = statistics.median(times["upstream"])
    return [
        [waiting, name, f"{admitted[name]:.1f}", f"{statistics.median(t):,.0f}", f"{statistics.median(t) / base:.3f}x"]
        for name, t in times.items()
    ]


def run() -> str:
    import vllm.v1.core.sched.scheduler as sched_mod

    import vllm_ascend.patch.platform.patch_balance_schedule as patch

    upstream_cls = sched_mod._balance_original_scheduler  # type: ignore[attr-defined]
    rows = [row for waiting in WAITING for row in _rows_for(waiting, upstream_cls, patch.BalanceScheduler)]
    return "\n\n".join(
        [
            f"### `schedule()` per step (cap {CAP}, {RUNNING} running, mean of {STEPS} steps, "
            f"median of {ROUNDS} interleaved rounds; microseconds)",
            table(["waiting", "variant", "admitted/step", "us/step", "vs upstream"], rows),
            "Goal: balance on, gate open, at most 1.01x upstream at DP 8 and DP 128. A closed gate admits "
            "nothing, so it does less work than upstream; it is shown for the cost of the check itself.",
        ]
    )


if __name__ == "__main__":
    print(run())

"""``schedule()`` per step on real vLLM objects: the generated BalanceScheduler (balance off, and on
with the gate open) against upstream's Scheduler, across DP sizes and waiting-queue depths.

Paired in lockstep: an upstream scheduler and a variant get the same requests and the same model
outputs, and each step times both ``schedule()`` calls back to back (alternating which goes first).
A gate that stays open admits exactly what upstream admits, so the two do the same work step by
step (checked every step); only the deltas' own cost differs. On a shared machine whose speed
drifts by tens of percent within seconds, a ratio of separate runs cannot resolve 1%; a per-step
pair sees the same machine twice within a millisecond. The gate reads one number (the leader's
count, reduced once per gather), so DP size should not show here.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Any

from balance_dev import vllm_objects as vo
from benchmarks.common import table

CAP = 256
DP_SIZES = (2, 8, 128)
WAITING = (0, 256, 4096)
RUNNING = 128  # requests already decoding when the measurement starts
STEPS = 60
ROUNDS = 8
GOAL = 1.01


def _scheduler(cls: type, enabled: bool | None, dp: int) -> Any:
    extra = vo.balance_config(enabled) if enabled is not None else None
    config = vo.make_vllm_config(max_num_seqs=CAP, max_num_batched_tokens=4096, additional_config=extra)
    scheduler = vo.make_scheduler(cls, config, num_blocks=65536)
    if enabled:
        # What balance_gather() leaves when the DP group's leader is one below the cap: the gate is
        # evaluated for every admitted request and always lets it through. (The DP size changes only
        # the gather, which benchmarks/gather_bench.py measures; schedule() reads the one number.)
        scheduler.balance_leader_running = CAP - 1
    return scheduler


def _timed_step(scheduler: Any) -> tuple[int, Any]:
    """One engine step: ``schedule()`` timed, then the model's output fed back (not timed)."""
    start = time.perf_counter_ns()
    out = scheduler.schedule()
    elapsed = time.perf_counter_ns() - start
    scheduler.update_from_output(out, vo.fake_model_output(out, scheduler))
    return elapsed, out


def _paired_round(upstream: Any, variant: Any, waiting: int) -> tuple[list[int], list[int], int]:
    """Per-step ns of each, and requests admitted, over STEPS lockstep steps after a shared warm-up.

    Requests are short (deterministic lengths), so some finish every step; the waiting queue is
    topped up to its depth before each step, so requests are admitted every step and the gate runs
    once per admitted request, as in a busy server.
    """
    pair = (upstream, variant)
    for scheduler in pair:
        for i in range(RUNNING):
            scheduler.add_request(vo.make_request(f"run{i}", 32, 16 + i % 48))
    while len(upstream.running) < RUNNING:
        for scheduler in pair:
            _timed_step(scheduler)
    serial = 0
    base_ns: list[int] = []
    variant_ns: list[int] = []
    admitted = 0
    gc.collect()
    gc.disable()  # a collection inside one call of a pair would be charged to that side alone
    try:
        for step in range(STEPS):
            while len(upstream.waiting) < waiting:
                for scheduler in pair:
                    scheduler.add_request(vo.make_request(f"wait{serial}", 32, 4 + serial % 48))
                serial += 1
            # Alternate who goes first; each side's own update directly follows its schedule(), so
            # neither finds its state warmer in cache than the other over two steps.
            first, second = pair if step % 2 == 0 else pair[::-1]
            t_first, out_first = _timed_step(first)
            t_second, out_second = _timed_step(second)
            if out_first.num_scheduled_tokens != out_second.num_scheduled_tokens:
                raise AssertionError(f"step {step}: the open gate scheduled differently from upstream")
            t_base, t_variant = (t_first, t_second) if first is upstream else (t_second, t_first)
            base_ns.append(t_base)
            variant_ns.append(t_variant)
            admitted += len(out_first.scheduled_new_reqs)
    finally:
        gc.enable()
    return base_ns, variant_ns, admitted


def _row(waiting: int, name: str, upstream_cls: type, balance_cls: type, enabled: bool, dp: int) -> list[object]:
    base_ns: list[int] = []
    variant_ns: list[int] = []
    admitted = 0
    for _ in range(ROUNDS):
        b, v, a = _paired_round(_scheduler(upstream_cls, None, 1), _scheduler(balance_cls, enabled, dp), waiting)
        base_ns += b
        variant_ns += v
        admitted += a
    per_step = statistics.median(v / b for b, v in zip(base_ns, variant_ns, strict=True))
    totals = sum(variant_ns) / sum(base_ns)
    return [
        waiting,
        name,
        f"{admitted / (ROUNDS * STEPS):.1f}",
        f"{statistics.median(base_ns) / 1000:,.0f}",
        f"{statistics.median(variant_ns) / 1000:,.0f}",
        f"{per_step:.4f}x",
        f"{totals:.4f}x",
    ]


def run() -> str:
    import vllm.v1.core.sched.scheduler as sched_mod

    import vllm_ascend.patch.platform.patch_balance_schedule as patch

    upstream_cls = sched_mod._balance_original_scheduler  # type: ignore[attr-defined]
    balance_cls = patch.BalanceScheduler
    rows = []
    for waiting in WAITING:
        rows.append(_row(waiting, "balance off", upstream_cls, balance_cls, False, 1))
        rows += [_row(waiting, f"on, gate open, DP {dp}", upstream_cls, balance_cls, True, dp) for dp in DP_SIZES]
    return "\n\n".join(
        [
            f"### `schedule()` per step, paired with upstream in lockstep (cap {CAP}, {RUNNING} running, "
            f"{ROUNDS} rounds of {STEPS} steps; microseconds)",
            table(
                [
                    "waiting",
                    "variant",
                    "admitted/step",
                    "upstream us/step",
                    "variant us/step",
                    "vs upstream (median of per-step ratios)",
                    "vs upstream (total time)",
                ],
                rows,
            ),
            f"Goal: balance on, gate open, at most {GOAL}x upstream at DP 8 and DP 128. Every step of every "
            "pair scheduled the same requests (checked), so the ratio is the deltas' own cost. A closed gate "
            "admits nothing and so does less work than upstream; it is not a like-for-like row.",
        ]
    )


if __name__ == "__main__":
    print(run())

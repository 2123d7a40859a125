"""DP simulation: N real processes, real gloo collectives, real BalanceScheduler, upstream's sync.

Each rank runs a loop shaped like upstream ``DPEngineCoreProc.run_busy_loop``: input, a step
(``schedule()`` + a fake model output, or a dummy batch when the rank has no work), then
``_has_global_unfinished_reqs`` (upstream's real method: an all-reduce every 32 steps; from 0.32 at
step 1 and every ``dp_sync_interval``), and the idle
``continue`` when no rank has work. Idle ranks block as on the input queue and wake on their own
request or on START_DP_WAVE (after a random delay: ranks learn of a wave at different times), and
sometimes spuriously (utility calls, stale wave messages) for one idle iteration.

``--placement`` picks where ``balance_gather()`` runs: ``sync`` (shipped: right after the sync),
``schedule`` (seed lesson A) or ``before-sync`` (seed lesson B, in the engine step). The last two
must hang; a collective timeout detects it and every process is ended.

    python -m balance_dev.dp_sim --ranks 4 --steps 10000 --seed 1
"""

from __future__ import annotations

import argparse
import bisect
import datetime
import json
import multiprocessing as mp
import os
import random
import socket
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from balance_dev.upstream_cap import upstream_cap

PLACEMENTS = ("sync", "schedule", "before-sync")
CAP = 4  # max_num_seqs per rank: small, so the cap is hit often
SPURIOUS_WAKE = 0.25


@dataclass
class RankReport:
    rank: int
    placement: str
    steps_active: int = 0
    waves: int = 0
    admitted: int = 0
    finished: int = 0
    freeze_steps: int = 0
    gathers: int = 0
    violations: list[str] = field(default_factory=list)
    running_by_tick: dict[int, int] = field(default_factory=dict)
    hang: str | None = None  # stuck or failed in a collective (what the negative controls expect)
    error: str | None = None  # anything else: a harness or scheduler bug, never a pass for a control
    tick: int = 0


def arrival_plan(seed: int, ranks: int, steps: int) -> dict[int, list[tuple[int, int, int]]]:
    """tick -> [(rank, prompt_len, max_tokens)]; identical on every rank (same seed)."""
    rng = random.Random(seed)
    weights = [3] + [1] * (ranks - 1)  # rank 0 gets more: the imbalance balance exists for
    plan: dict[int, list[tuple[int, int, int]]] = {}
    for tick in range(steps):
        phase = (tick // 200) % 4
        count = 0
        if phase == 0:
            count = sum(rng.random() < 0.05 * w for w in weights)
        elif phase == 1 and tick % 200 == 0:
            count = 3 * ranks  # a burst
        elif phase == 3:
            count = int(rng.random() < 0.03)
        # phase 2: a long idle stretch, so ranks drain at different times and waves end
        for _ in range(count):
            rank = rng.choices(range(ranks), weights)[0]
            plan.setdefault(tick, []).append((rank, rng.randrange(8, 160), rng.randrange(4, 60)))
    return plan


def _rank_main(rank: int, args: argparse.Namespace, port: int, results: Any) -> None:
    import torch.distributed as dist

    import vllm_ascend.patch.platform.patch_balance_schedule as patch
    from balance_dev import vllm_objects as vo

    report = RankReport(rank=rank, placement=args.placement)
    # Start-up (imports, vLLM's model inspection) takes ranks different times on a loaded machine:
    # the default group waits long for that; the loop runs on a group with the short timeout.
    setup = datetime.timedelta(seconds=max(300.0, args.timeout))
    store = dist.TCPStore("127.0.0.1", port, args.ranks, rank == 0, timeout=setup)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=args.ranks, timeout=setup)
    dp_group = dist.new_group(list(range(args.ranks)), backend="gloo", timeout=datetime.timedelta(seconds=args.timeout))
    try:
        scheduler, engine = _build(args, dp_group, patch, vo)
        dist.barrier()  # every rank is built: from here on a stuck collective is a hang
        _loop(rank, args, report, scheduler, engine, vo)
    except RuntimeError as exc:  # gloo's timeout, or a peer that gave up on the same collective
        first = (str(exc).splitlines() or [""])[0][:200]
        report.hang = (
            f"rank {rank} stuck in a collective at tick {report.tick} (active step {report.steps_active + 1}): "
            f"{type(exc).__name__}: {first}"
        )
    except Exception as exc:
        report.error = f"rank {rank} crashed at tick {report.tick}: {type(exc).__name__}: {exc}"
    results.put(json.dumps(asdict(report)))
    results.close()
    results.join_thread()  # os._exit below would drop a report still in the feeder thread
    failed = report.hang is not None or report.error is not None
    if not failed:
        dist.barrier()
        dist.destroy_process_group()
    os._exit(1 if failed else 0)  # don't wait on peers stuck in a collective


def _build(args: argparse.Namespace, group: Any, patch: Any, vo: Any) -> tuple[Any, Any]:
    config = vo.make_vllm_config(
        max_num_seqs=CAP,
        max_num_batched_tokens=256,
        data_parallel_size=args.ranks,
        additional_config=vo.balance_config(args.balance),
    )
    scheduler = vo.make_scheduler(patch.BalanceScheduler, config, num_blocks=4096)
    engine_cls = patch.BalanceDPEngineCoreProc if args.placement == "sync" else patch._OriginalDPEngineCoreProc
    engine = vo.bare_dp_engine(engine_cls, group, scheduler)  # no model executor: the loop plays its part
    scheduler.dp_group = group
    return scheduler, engine


def _gate_closed(scheduler: Any) -> bool:
    """What the gate in schedule() reads: upstream's own cap check, asked of the gathered leader."""
    if not scheduler._balance_enabled:
        return False
    import vllm.v1.core.sched.scheduler as sched_mod

    check = upstream_cap(sched_mod._balance_original_scheduler)  # type: ignore[attr-defined]
    return check.stops(scheduler, scheduler.balance_leader_running)


def _loop(rank: int, args: argparse.Namespace, report: RankReport, scheduler: Any, engine: Any, vo: Any) -> None:
    gathers = 0
    real_gather = scheduler.balance_gather

    def counted_gather() -> None:
        nonlocal gathers
        if scheduler._balance_enabled:
            gathers += 1
        real_gather()

    scheduler.balance_gather = counted_gather
    plan = arrival_plan(args.seed, args.ranks, args.steps)
    ticks = sorted(plan)
    jitter = random.Random(args.seed * 1000 + rank)
    serial = 0

    def arrive(tick: int) -> bool:
        nonlocal serial
        mine = [(p, m) for r, p, m in plan.get(tick, ()) if r == rank]
        for prompt, max_tokens in mine:
            serial += 1
            scheduler.add_request(vo.make_request(f"r{rank}-{serial}", prompt, max_tokens))
        return bool(mine)

    tick = 0
    while tick < args.steps:
        report.tick = tick
        # 1) input: block while idle, like _process_input_queue.
        if not engine.engines_running and not scheduler.has_requests():
            if jitter.random() < SPURIOUS_WAKE and args.placement == "before-sync":
                scheduler.balance_gather()  # runs before the idle `continue` (lesson B)
                # idle iteration: upstream takes the `continue`
            following = bisect.bisect_left(ticks, tick)
            if following == len(ticks) or ticks[following] >= args.steps:
                break  # every rank is idle here with the same plan: all stop together
            tick = ticks[following]
            if not arrive(tick):
                time.sleep(jitter.random() * 0.005)  # START_DP_WAVE reaches ranks at different times
                engine.engines_running = True
        else:
            arrive(tick)
        # 2) the engine step
        gathers_before = gathers
        executed = False
        if args.placement == "before-sync":
            scheduler.balance_gather()
        frozen = _gate_closed(scheduler)
        before = {r.request_id for r in scheduler.running}
        if scheduler.has_requests():
            if args.placement == "schedule":
                scheduler.balance_gather()  # inside schedule() (lesson A): drained ranks skip it
                frozen = _gate_closed(scheduler)
            out = scheduler.schedule()
            scheduler.update_from_output(out, vo.fake_model_output(out, scheduler))
            executed = out.total_num_scheduled_tokens > 0
        admitted = {r.request_id for r in scheduler.running} - before
        report.admitted += len(admitted)
        if frozen:
            report.freeze_steps += 1
            if admitted:
                report.violations.append(f"tick {tick}: admitted {sorted(admitted)} while a rank was at the cap")
        local_unfinished = scheduler.has_unfinished_requests()
        if not executed and not local_unfinished and not engine.engines_running:
            tick += 1
            continue  # all engines idle
        # 3) the cross-rank sync (upstream's real method; the shipped placement gathers after it)
        engine.engines_running = engine._has_global_unfinished_reqs(local_unfinished)
        report.steps_active += 1
        report.running_by_tick[tick] = len(scheduler.running)
        if args.placement == "sync" and scheduler._balance_enabled and gathers - gathers_before != 1:
            report.violations.append(f"tick {tick}: {gathers - gathers_before} gathers in one active step")
        if not engine.engines_running:
            engine.current_wave += 1
            engine.step_counter = 0
        tick += 1
    report.waves = engine.current_wave
    report.gathers = gathers
    report.finished = serial - scheduler.get_num_unfinished_requests()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(args: argparse.Namespace) -> tuple[list[RankReport], float, str | None]:
    """Run all ranks; return their reports, the wall time, and a hang description (or None)."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, args, port, results), daemon=True) for r in range(args.ranks)]
    start = time.monotonic()
    for p in procs:
        p.start()
    reports: list[RankReport] = []
    deadline = start + args.watchdog
    hang = None
    try:
        while len(reports) < args.ranks:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                hang = f"watchdog: no result from {args.ranks - len(reports)} rank(s) after {args.watchdog:.0f}s"
                break
            try:
                reports.append(_report_from_json(results.get(timeout=min(remaining, 1.0))))
            except Exception:  # queue.Empty: keep waiting, unless a rank died without reporting
                if any(p.exitcode not in (None, 0) for p in procs) and results.empty() and len(reports) < args.ranks:
                    time.sleep(1.0)
                    if results.empty():
                        hang = hang or "a rank exited without a report"
                        break
            if any(r.error for r in reports):
                raise RuntimeError(f"dp_sim harness failure: {next(r.error for r in reports if r.error)}")
            if any(r.hang for r in reports):
                hang = _describe_hang(reports, results, procs)
                break
    finally:
        for p in procs:  # never leave processes behind, whatever happened
            p.join(timeout=5 if hang is None else 0.5)
            if p.is_alive():
                p.kill()
                p.join()
    return sorted(reports, key=lambda r: r.rank), time.monotonic() - start, hang


def _describe_hang(reports: list[RankReport], results: Any, procs: list[Any]) -> str:
    """The hang as the rank that timed out saw it; peers that merely lost the connection follow."""
    grace = time.monotonic() + 3.0
    while time.monotonic() < grace and len(reports) < len(procs):
        try:
            reports.append(_report_from_json(results.get(timeout=0.2)))
        except Exception:  # queue.Empty
            continue
    hangs = sorted((r.hang for r in reports if r.hang), key=lambda h: "Timed out" not in h)
    return hangs[0] + (f" (+{len(hangs) - 1} rank(s) failed after it)" if len(hangs) > 1 else "")


def _report_from_json(payload: str) -> RankReport:
    data = json.loads(payload)
    data["running_by_tick"] = {int(tick): count for tick, count in data["running_by_tick"].items()}  # JSON keys are str
    return RankReport(**data)


def spread(reports: list[RankReport]) -> dict[str, float]:
    """Max-min of the running counts across ranks, over the active steps every rank took."""
    if not reports:
        return {"mean": 0.0, "p95": 0.0, "max": 0.0}
    ticks = sorted(set.intersection(*(set(r.running_by_tick) for r in reports)))
    gaps = sorted(
        max(r.running_by_tick[t] for r in reports) - min(r.running_by_tick[t] for r in reports) for t in ticks
    )
    if not gaps:
        return {"mean": 0.0, "p95": 0.0, "max": 0.0}
    return {"mean": statistics.fmean(gaps), "p95": float(gaps[int(0.95 * (len(gaps) - 1))]), "max": float(gaps[-1])}


def format_report(args: argparse.Namespace, reports: list[RankReport], wall: float, hang: str | None) -> str:
    lines = [
        f"placement={args.placement} balance={'on' if args.balance else 'off'} ranks={args.ranks} "
        f"steps={args.steps} seed={args.seed} wall={wall:.1f}s"
    ]
    if hang:
        lines.append(f"HANG DETECTED: {hang}")
        return "\n".join(lines)
    lines.append("rank | active steps | waves | admitted | finished | freeze steps | gathers | violations")
    for r in reports:
        lines.append(
            f"{r.rank:>4} | {r.steps_active:>12} | {r.waves:>5} | {r.admitted:>8} | {r.finished:>8} | "
            f"{r.freeze_steps:>12} | {r.gathers:>7} | {len(r.violations):>10}"
        )
    s = spread(reports)
    lines.append(
        f"running-count spread across ranks (max-min per active step): mean {s['mean']:.2f}, "
        f"p95 {s['p95']:.0f}, max {s['max']:.0f}"
    )
    for r in reports:
        lines.extend(f"  violation rank {r.rank}: {v}" for v in r.violations[:5])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m balance_dev.dp_sim", description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--placement", choices=PLACEMENTS, default="sync")
    parser.add_argument("--no-balance", dest="balance", action="store_false", help="balance off (the baseline)")
    parser.add_argument("--timeout", type=float, default=20.0, help="collective timeout, seconds")
    parser.add_argument("--watchdog", type=float, default=900.0, help="whole-run limit, seconds")
    parser.add_argument("--compare", action="store_true", help="also run balance off and compare the spread")
    parser.add_argument(
        "--expect-hang", action="store_true", help="negative control: exit 0 only if the hang is detected"
    )
    args = parser.parse_args(argv)
    status = 0
    runs = [args] + ([argparse.Namespace(**{**vars(args), "balance": False})] if args.compare else [])
    for run_args in runs:
        reports, wall, hang = run(run_args)
        print(format_report(run_args, reports, wall, hang), flush=True)
        failed = bool(hang) or any(r.violations for r in reports) or len(reports) != run_args.ranks
        if args.expect_hang:
            failed = not hang
            print("negative control:", "hang detected as expected" if hang else "NO HANG: the control failed")
        status = status or int(failed)
    return status


if __name__ == "__main__":
    sys.exit(main())

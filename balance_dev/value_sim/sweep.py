"""The standard sweep behind ``make value-sim``: tables in ``value_sim.md``, plots, raw ``value_sim.json``.

    python -m balance_dev.value_sim sweep [--jobs 2] [--seconds 45] [--out benchmarks/results]
    python -m balance_dev.value_sim sweep --render-only   # re-render from value_sim.json

Every configuration of a comparison shares its seed, so balance modes see the same arrival trace.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from balance_dev.value_sim.config import SimConfig
from balance_dev.value_sim.cost import CostModel
from balance_dev.value_sim.sweep_plan import Result, capacity_probes, cost_name, plan
from balance_dev.value_sim.sweep_report import render
from balance_dev.value_sim.workload import Lengths


def _worker_init() -> None:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")


def _run(cfg: SimConfig) -> Result:
    from balance_dev.value_sim.model import measure_capacity, simulate

    start = time.monotonic()
    result = measure_capacity(cfg) if cfg.arrivals == "closed" and cfg.capacity_req_s == 0 else simulate(cfg)
    result["wall_s"] = time.monotonic() - start
    return result


def _run_all(pool: ProcessPoolExecutor, cfgs: Sequence[SimConfig], log: Callable[[str], None]) -> list[Result]:
    # Biggest first: the pool's two workers finish together.
    order = sorted(range(len(cfgs)), key=lambda i: -cfgs[i].dp)
    futures = {i: pool.submit(_run, cfgs[i]) for i in order}
    results: list[Result] = [{} for _ in cfgs]
    for done, i in enumerate(order, 1):
        results[i] = futures[i].result()
        c = cfgs[i]
        log(
            f"  [{done}/{len(cfgs)}] dp={c.dp} {c.arrivals} load={c.load} {c.routing} "
            f"stale={c.staleness_ms:g}ms {c.balance} {c.gather}@{c.link_us:g}us: "
            f"{results[i]['throughput_tok_s']:.0f} tok/s, "
            f"ttft p99 {results[i]['ttft_p99_s']:.2f}s ({results[i]['wall_s']:.1f}s wall)"
        )
    return results


def run_sweep(base: SimConfig, jobs: int, log: Callable[[str], None]) -> dict[str, Any]:
    start = time.monotonic()
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_init) as pool:
        log("capacity (closed loop, 2x the slots, balance off, score routing):")
        probes = capacity_probes(base)
        cap_results = _run_all(pool, probes, log)
        capacity = {(c.dp, c.cost): r["capacity_req_s"] for c, r in zip(probes, cap_results, strict=True)}
        cfgs = plan(base, capacity)
        log(f"{len(cfgs)} configurations:")
        results = _run_all(pool, cfgs, log)
    return {
        "base": _cfg_dict(base),
        "capacity": [
            {"dp": c.dp, "cost_model": cost_name(c.cost), **_pick(r)} for c, r in zip(probes, cap_results, strict=True)
        ],
        "results": results,
        "wall_s": time.monotonic() - start,
        "jobs": jobs,
    }


def _cfg_dict(cfg: SimConfig) -> dict[str, Any]:
    return asdict(cfg)


def _pick(r: Result) -> Result:
    keys = ("capacity_req_s", "throughput_tok_s", "step_ms_mean", "prefill_step_fraction", "cap_hit_fraction")
    return {k: r[k] for k in (*keys, "wall_s")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m balance_dev.value_sim sweep", description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    p.add_argument("--render-only", action="store_true", help="re-render from OUT/value_sim.json")
    args = p.parse_args(argv)
    raw = args.out / "value_sim.json"
    if args.render_only:
        data = json.loads(raw.read_text())
    else:
        base = SimConfig(seconds=args.seconds, seed=args.seed, cost=CostModel(), lengths=Lengths())
        data = run_sweep(base, args.jobs, lambda line: print(line, flush=True))
        args.out.mkdir(parents=True, exist_ok=True)
        raw.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    render(data, args.out)
    print(f"wrote {args.out / 'value_sim.md'} ({data['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m balance_dev.value_sim``: one simulated configuration, or (``sweep``) the standard sweep."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from dataclasses import fields

if __name__ == "__main__":  # the CLI's process only: importing this module (the tests do) leaves os.environ alone
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # --json: stdout carries one object

from balance_dev.value_sim.collective import DEFAULT_LINK_US, GATHERS
from balance_dev.value_sim.config import ARRIVALS, BALANCE_MODES, SimConfig
from balance_dev.value_sim.cost import CostModel
from balance_dev.value_sim.routing import ROUTINGS
from balance_dev.value_sim.workload import Lengths


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m balance_dev.value_sim",
        description="Simulate a DP group of real vLLM schedulers in lockstep and report serving metrics.",
    )
    p.add_argument("--dp", type=int, default=8)
    p.add_argument("--arrivals", choices=ARRIVALS, default="poisson")
    p.add_argument("--load", type=float, default=1.0, help="open: x measured capacity; closed: x dp*cap requests")
    p.add_argument("--routing", choices=ROUTINGS, default="score")
    p.add_argument("--staleness-ms", type=float, default=100.0, help="coordinator publication interval")
    p.add_argument("--balance", choices=BALANCE_MODES, default="off")
    p.add_argument("--gather", choices=GATHERS, default="group_max_tcp", help="balance's per-step gather (its cost)")
    p.add_argument("--link-us", type=float, default=DEFAULT_LINK_US, help="one-way latency between DP ranks, us")
    p.add_argument("--seconds", type=float, default=60.0, help="simulated horizon")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cap", type=int, default=16, help="max_num_seqs per rank")
    p.add_argument("--token-budget", type=int, default=2048, help="max_num_batched_tokens per rank")
    p.add_argument("--prefill-interval", type=int, default=4, help="prefill_schedule_interval for throttle")
    p.add_argument("--burst-mean", type=float, default=8.0, help="mean requests per burst (bursty)")
    p.add_argument("--think-s", type=float, default=0.0, help="closed loop: client think time")
    p.add_argument("--capacity-req-s", type=float, default=None, help="skip measuring the balance-off capacity")
    p.add_argument("--trace", default=None, help="JSONL: arrival_s, prompt_len, output_len")
    for f in fields(CostModel):
        p.add_argument(f"--{f.name.replace('_', '-')}", type=float, default=f.default)
    for f in fields(Lengths):
        p.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sweep"]:
        from balance_dev.value_sim import sweep

        return sweep.main(argv[1:])
    args = _parser().parse_args(argv)
    from balance_dev.value_sim.model import measure_capacity, simulate

    cost = CostModel(**{f.name: getattr(args, f.name) for f in fields(CostModel)})
    lengths = Lengths(**{f.name: getattr(args, f.name) for f in fields(Lengths)})
    base = {f.name: getattr(args, f.name) for f in fields(SimConfig) if hasattr(args, f.name)}
    cfg = SimConfig(**{**base, "cost": cost, "lengths": lengths, "capacity_req_s": None})
    start = time.monotonic()
    # vLLM logs to stdout, and its import-time errors (e.g. no Triton on CPU) ignore the level set
    # above: with --json, stdout carries the result object alone.
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        capacity = args.capacity_req_s
        if capacity is None and args.arrivals in ("poisson", "bursty"):
            capacity = measure_capacity(cfg)["capacity_req_s"]
        result = simulate(SimConfig(**{**base, "cost": cost, "lengths": lengths, "capacity_req_s": capacity}))
    result["wall_s"] = time.monotonic() - start
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        keys = ["throughput_tok_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_ms", "tpot_p99_ms", "e2e_p99_s"]
        keys += ["frozen_fraction", "prefill_step_fraction", "cap_hit_fraction", "spread_mean", "queues_stable"]
        keys += ["gather_ms_per_step"]
        print(f"dp={args.dp} arrivals={args.arrivals} load={args.load} routing={args.routing} balance={args.balance}")
        for k in (*keys, "steps", "finished", "wall_s"):
            v = result[k]
            print(f"  {k:24} {v:.4g}" if isinstance(v, float) else f"  {k:24} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The standard sweep behind ``make value-sim``: tables in ``value_sim.md``, plots, raw ``value_sim.json``.

    python -m balance_dev.value_sim sweep [--jobs 2] [--seconds 45] [--out benchmarks/results]
    python -m balance_dev.value_sim sweep --render-only   # re-render from value_sim.json

Every configuration of a comparison shares its seed, so balance modes see the same arrival trace.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from balance_dev.value_sim.collective import MODELS
from balance_dev.value_sim.model import CostModel, Lengths, SimConfig

DPS = (2, 8, 32)
LOADS = (0.5, 0.8, 1.0, 1.2)
HEADLINE_MODES = ("off", "on", "throttle")
# Balance on with the gather it ran before group_max, over the same links: what the new gather saves.
OLD_GATHER = "all_gather"
OLD_LABEL = f"on, {OLD_GATHER}"
# Where the gain is (beyond capacity), how much of it each gather keeps as the links get slower.
# DP 128 runs here only (balance off and on at this load): its gather costs are the models' extrapolation.
LINK_DPS = (8, 32, 128)
LINK_LOAD = 1.2
LINK_US = (0.0, 50.0, 200.0, 1000.0)
LINK_GATHERS = ("group_max_tcp", OLD_GATHER)
SIDE_DP = 8
SIDE_LOADS = (0.8, 1.0, 1.2)
ROUTING_LOADS = (1.0, 1.2)  # below the cap routing cannot matter to balance: on == off there
STALENESS_MS = (0.0, 100.0, 1000.0)
SENSITIVITY_LOADS = (1.0, 1.2)
EXTRA_SEEDS = (2, 3)
# How much of the result is the assumed coefficients: the same runs under other step-cost models.
COST_VARIANTS = {
    "flat (45 ms, whatever the batch)": CostModel.flat(45.0),
    "prefill 3x cheaper, no mixed-step extra": CostModel(token_ms=0.017, expert_token_ms=0.02, prefill_ms=0.0),
    "prefill 2x dearer, 20 ms mixed-step extra": CostModel(token_ms=0.1, expert_token_ms=0.12, prefill_ms=20.0),
}
Result = dict[str, Any]


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


def capacity_probes(base: SimConfig) -> list[SimConfig]:
    """Balance off, closed loop with 2x the slots: per DP size, and at DP 8 per cost variant.

    ``capacity_req_s=0`` marks a probe: the worker runs ``measure_capacity`` on it.
    """
    probe = replace(base, arrivals="closed", load=2.0, balance="off", capacity_req_s=0.0)
    sizes = [replace(probe, dp=dp) for dp in sorted({*DPS, *LINK_DPS})]
    return sizes + [replace(probe, dp=SIDE_DP, cost=c) for c in COST_VARIANTS.values()]


def plan(base: SimConfig, capacity: dict[tuple[int, CostModel], float]) -> list[SimConfig]:
    """Open-loop load is relative to the capacity of the same DP size and cost model."""
    cfgs = []
    for dp in DPS:
        for load in LOADS:
            for mode in HEADLINE_MODES:
                cfgs.append(replace(base, dp=dp, load=load, balance=mode, capacity_req_s=capacity[dp, base.cost]))
            cfgs.append(
                replace(base, dp=dp, load=load, balance="on", gather=OLD_GATHER, capacity_req_s=capacity[dp, base.cost])
            )
    for dp in LINK_DPS:
        in_headline = {(base.gather, base.link_us), (OLD_GATHER, base.link_us)} if dp in DPS else set()
        if dp not in DPS:
            cfgs.append(replace(base, dp=dp, load=LINK_LOAD, balance="off", capacity_req_s=capacity[dp, base.cost]))
        for gather in LINK_GATHERS:
            for link in LINK_US:
                if (gather, link) not in in_headline:
                    cfgs.append(
                        replace(
                            base,
                            dp=dp,
                            load=LINK_LOAD,
                            balance="on",
                            gather=gather,
                            link_us=link,
                            capacity_req_s=capacity[dp, base.cost],
                        )
                    )
    side = replace(base, dp=SIDE_DP, capacity_req_s=capacity[SIDE_DP, base.cost])
    for load in ROUTING_LOADS:
        cfgs.append(replace(side, load=load, balance="on+throttle"))
        for routing in ("rr", "random"):
            for mode in ("off", "on"):
                cfgs.append(replace(side, load=load, routing=routing, balance=mode))
    for load in SIDE_LOADS:
        for arrivals in ("bursty", "closed"):
            for mode in HEADLINE_MODES:
                cfgs.append(replace(side, load=load, arrivals=arrivals, balance=mode))
    for staleness in STALENESS_MS:
        if staleness != base.staleness_ms:
            for mode in ("off", "on"):
                cfgs.append(replace(side, load=1.0, staleness_ms=staleness, balance=mode))
    for load in SENSITIVITY_LOADS:
        for mode in ("off", "on"):
            for cost in COST_VARIANTS.values():
                cfgs.append(replace(side, load=load, cost=cost, balance=mode, capacity_req_s=capacity[SIDE_DP, cost]))
            cfgs.extend(replace(side, load=load, seed=seed, balance=mode) for seed in EXTRA_SEEDS)
    return cfgs


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
            {"dp": c.dp, "cost_model": _cost_name(c.cost), **_pick(r)} for c, r in zip(probes, cap_results, strict=True)
        ],
        "results": results,
        "wall_s": time.monotonic() - start,
        "jobs": jobs,
    }


def _cost_name(cost: CostModel) -> str:
    return next((name for name, c in COST_VARIANTS.items() if c == cost), "default")


def _cfg_dict(cfg: SimConfig) -> dict[str, Any]:
    return asdict(cfg)


def _pick(r: Result) -> Result:
    keys = ("capacity_req_s", "throughput_tok_s", "step_ms_mean", "prefill_step_fraction", "cap_hit_fraction")
    return {k: r[k] for k in (*keys, "wall_s")}


# --------------------------------------------------------------------------------------------------
# Report


def _find(results: list[Result], **where: Any) -> Result | None:
    """The run with these settings; unnamed ones default to the headline's (Poisson, score, 100 ms)."""
    base = {"arrivals": "poisson", "routing": "score", "staleness_ms": 100.0}
    want = {**base, **where}
    for r in results:
        if all(r[k] == v for k, v in want.items()):
            return r
    return None


def _pct_change(new: float, old: float) -> str:
    return f"{100 * (new - old) / old:+.1f}%" if old else "n/a"


def _row(r: Result, ref: Result | None) -> str:
    delta_tp = _pct_change(r["throughput_tok_s"], ref["throughput_tok_s"]) if ref and ref is not r else ""
    delta_ttft = _pct_change(r["ttft_p99_s"], ref["ttft_p99_s"]) if ref and ref is not r else ""
    return (
        f"| {r['throughput_tok_s']:.0f} | {delta_tp} | {r['ttft_p50_s']:.2f} | {r['ttft_p99_s']:.2f} | {delta_ttft} "
        f"| {r['tpot_p50_ms']:.0f} | {r['tpot_p99_ms']:.0f} | {r['e2e_p99_s']:.1f} | {r['frozen_fraction']:.2f} "
        f"| {r['prefill_step_fraction']:.2f} | {r['cap_hit_fraction']:.2f} | {r['spread_mean']:.2f} "
        f"| {'yes' if r['queues_stable'] else '**no**'} | {r['wall_s']:.0f} |"
    )


_HEAD = (
    "| tok/s | Δ tok/s vs off | TTFT p50 s | TTFT p99 s | Δ TTFT p99 | TPOT p50 ms | TPOT p99 ms | e2e p99 s "
    "| frozen | prefill steps | leader at cap | spread | stable | wall s |"
)
_SEP = "|---" * 14 + "|"


def _table(title: str, keys: list[str], rows: list[tuple[list[str], Result, Result | None]]) -> list[str]:
    lines = [f"### {title}", "", "| " + " | ".join(keys) + " " + _HEAD, "|---" * len(keys) + _SEP]
    for labels, r, ref in rows:
        lines.append("| " + " | ".join(labels) + " " + _row(r, ref))
    return [*lines, ""]


def render(data: dict[str, Any], out: Path) -> str:
    results: list[Result] = data["results"]
    base = data["base"]
    # Unless a table asks otherwise: the sweep's own seed and cost model.
    find = functools.partial(
        _find, results, seed=base["seed"], cost=base["cost"], gather=base["gather"], link_us=base["link_us"]
    )
    walls = [r["wall_s"] for r in results]
    lines = [
        "# Value simulator: when does balance scheduling pay?",
        "",
        "Generated by `make value-sim` (`python -m balance_dev.value_sim sweep`); see docs/value.md,",
        '"When to enable balance scheduling" for the reading, and `balance_dev/value_sim/model.py` for the model.',
        "",
        f"Sweep wall time: {data['wall_s']:.0f} s with {data['jobs']} worker process(es); "
        f"{len(results) + len(data['capacity'])} simulations. Per configuration: "
        + ", ".join(
            f"DP {dp} mean {statistics.fmean(r['wall_s'] for r in results if r['dp'] == dp):.1f} s"
            for dp in sorted({r["dp"] for r in results})
        )
        + f" (all: {min(walls):.1f}-{max(walls):.1f} s).",
        "",
        f"Per rank: `max_num_seqs` {base['cap']}, `max_num_batched_tokens` {base['token_budget']}, chunked prefill, "
        f"KV large enough never to preempt. Horizon {base['seconds']:g} s of simulated time, the first "
        f"{100 * base['warmup_frac']:.0f}% discarded. "
        f"Lengths: lognormal prompt median {base['lengths']['prompt_median']:g} "
        f"(σ {base['lengths']['prompt_sigma']:g}), output median {base['lengths']['output_median']:g} "
        f"(σ {base['lengths']['output_sigma']:g}), clipped to the model length {base['lengths']['max_model_len']}. "
        f"Throttle: `prefill_schedule_interval` {base['prefill_interval']}. Seed {base['seed']} for every run.",
        "",
        "Step cost (ms): " + ", ".join(f"`{k}` {v:g}" for k, v in base["cost"].items()) + ".",
        "",
        f"With balance on every step also pays the gather (`balance_dev/value_sim/collective.py`, measured by "
        f"`make bench-net`): `{base['gather']}` over links of {base['link_us']:g} us unless a row says otherwise "
        f"(*{OLD_LABEL}*: the gather balance ran before `group_max`). Per step at {base['link_us']:g} us: "
        + ", ".join(
            f"DP {dp} {MODELS[base['gather']].step_ms(dp, base['link_us']):.2f} ms "
            f"({OLD_GATHER} {MODELS[OLD_GATHER].step_ms(dp, base['link_us']):.2f} ms)"
            for dp in sorted({*DPS, *LINK_DPS})
        )
        + f" (DP {max(LINK_DPS)}: extrapolated from N = 2..64)"
        + ".",
        "",
        "Load: open arrivals at `load` x the capacity below; closed loop with `load` x DP x `max_num_seqs` clients.",
        "TTFT counts requests still without a first token at the horizon as censored (horizon - arrival): where",
        "queues are not stable, the TTFT columns are lower bounds. *frozen*: steps whose gate was closed;",
        "*leader at cap*: steps after which some rank was at the cap (what the gate would read, also when off);",
        "*spread*: mean max-min running count across ranks; Δ columns compare with balance off in the same row group.",
        "",
        "## Capacity with balance off (closed loop, 2x slots)",
        "",
        "| DP | cost model | requests/s (tok/s ÷ mean output) | tok/s | mean step ms | prefill steps | wall s |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in data["capacity"]:
        lines.append(
            f"| {c['dp']} | {c.get('cost_model', 'default')} | {c['capacity_req_s']:.2f} "
            f"| {c['throughput_tok_s']:.0f} | {c['step_ms_mean']:.1f} "
            f"| {c['prefill_step_fraction']:.2f} | {c['wall_s']:.0f} |"
        )
    lines += ["", "## Headline: Poisson arrivals, vLLM's score routing (100 ms snapshots)", ""]
    rows = []
    for dp in DPS:
        for load in LOADS:
            ref = find(dp=dp, load=load, balance="off")
            for label, where in _headline_variants():
                r = find(dp=dp, load=load, **where)
                if r:
                    rows.append(([str(dp), f"{load:g}", label], r, ref))
    lines += _table("DP x load x balance", ["DP", "load", "balance"], rows)
    lines += ["![throughput and TTFT p99 against load](value_sim_load.png)", ""]
    lines += ["![frozen fraction against load](value_sim_frozen.png)", ""]
    lines += _links(find)
    lines += [f"## DP {SIDE_DP}: routing, arrivals, staleness, on+throttle", ""]
    rows = []
    for load in ROUTING_LOADS:
        for routing in ("score", "rr", "random"):
            ref = find(dp=SIDE_DP, load=load, routing=routing, balance="off")
            for mode in ("off", "on"):
                r = find(dp=SIDE_DP, load=load, routing=routing, balance=mode)
                if r:
                    rows.append(([f"{load:g}", routing, mode], r, ref))
    lines += _table("Routing (Poisson)", ["load", "routing", "balance"], rows)
    rows = []
    for load in SIDE_LOADS:
        for arrivals in ("poisson", "bursty", "closed"):
            ref = find(dp=SIDE_DP, load=load, arrivals=arrivals, balance="off")
            for mode in (*HEADLINE_MODES, "on+throttle"):
                r = find(dp=SIDE_DP, load=load, arrivals=arrivals, balance=mode)
                if r:
                    rows.append(([f"{load:g}", arrivals, mode], r, ref))
    lines += _table("Arrival processes (score routing)", ["load", "arrivals", "balance"], rows)
    rows = []
    for staleness in STALENESS_MS:
        ref = find(dp=SIDE_DP, load=1.0, staleness_ms=staleness, balance="off")
        for mode in ("off", "on"):
            r = find(dp=SIDE_DP, load=1.0, staleness_ms=staleness, balance=mode)
            if r:
                rows.append(([f"{staleness:g}", mode], r, ref))
    lines += _table("Snapshot staleness (Poisson, load 1.0, score routing)", ["staleness ms", "balance"], rows)
    lines += _sensitivity(find, base)
    text = "\n".join(lines) + "\n"
    (out / "value_sim.md").write_text(text)
    _plots(find, out)
    return text


def _headline_variants() -> list[tuple[str, dict[str, Any]]]:
    variants: list[tuple[str, dict[str, Any]]] = [(mode, {"balance": mode}) for mode in HEADLINE_MODES]
    variants.insert(2, (OLD_LABEL, {"balance": "on", "gather": OLD_GATHER}))
    return variants


def _link_points(find: Callable[..., Result | None], dp: int, gather: str) -> list[tuple[float, Result]]:
    found = [(link, find(dp=dp, load=LINK_LOAD, balance="on", gather=gather, link_us=link)) for link in LINK_US]
    return [(link, r) for link, r in found if r is not None]


def break_even_us(points: Sequence[tuple[float, float]]) -> float | None:
    """The link latency at which the throughput gain (link, gain %) first reaches 0, linearly interpolated.

    None when the gain stays above 0 at every measured latency; 0.0 when there is no gain even at the first.
    """
    if points[0][1] <= 0:
        return 0.0
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if y1 <= 0:
            return x0 + (x1 - x0) * y0 / (y0 - y1)
    return None


def _links(find: Callable[..., Result | None]) -> list[str]:
    lines = [
        f"## The gather's cost: link latency (Poisson, load {LINK_LOAD:g}, score routing)",
        "",
        "Balance on, per step the gather's network rounds x the link's one-way latency plus its CPU share.",
        "",
    ]
    rows = []
    summary = []
    for dp in LINK_DPS:
        ref = find(dp=dp, load=LINK_LOAD, balance="off")
        for gather in LINK_GATHERS:
            gains = []
            for link, r in _link_points(find, dp, gather):
                rows.append(([str(dp), gather, f"{link:g}", f"{r['gather_ms_per_step']:.2f}"], r, ref))
                if ref:
                    gains.append((link, 100 * (r["throughput_tok_s"] / ref["throughput_tok_s"] - 1)))
            if gains:
                even = break_even_us(gains)
                last = f"{gains[-1][0]:g}"
                survives = f"beyond {last} us" if even is None else f"up to about {even:.0f} us"
                summary.append(
                    [str(dp), gather, *(f"{g:+.1f}%" for _, g in gains), survives],
                )
    lines += _table("Balance on, by gather and link latency", ["DP", "gather", "link us", "gather ms/step"], rows)
    lines += [
        "### Where the throughput gain over balance off survives",
        "",
        "| DP | gather | " + " | ".join(f"Δ tok/s at {link:g} us" for link in LINK_US) + " | gain survives |",
        "|---" * (len(LINK_US) + 3) + "|",
        *("| " + " | ".join(row) + " |" for row in summary),
        "",
        "![throughput gain against link latency](value_sim_link.png)",
        "",
    ]
    return lines


def _sensitivity(find: Callable[..., Result | None], base: dict[str, Any]) -> list[str]:
    lines = [
        "## How much rests on the assumed coefficients (DP 8, Poisson, score routing)",
        "",
        "The same runs under other step-cost models, and under other seeds (the arrival trace and lengths).",
        "",
    ]
    variants = {"default (the model above)": base["cost"]} | {k: asdict(v) for k, v in COST_VARIANTS.items()}
    rows = []
    for load in SENSITIVITY_LOADS:
        for name, cost in variants.items():
            ref = find(dp=SIDE_DP, load=load, cost=cost, balance="off")
            for mode in ("off", "on"):
                r = find(dp=SIDE_DP, load=load, cost=cost, balance=mode)
                if r:
                    rows.append(([f"{load:g}", name, mode], r, ref))
    lines += _table("Step-cost model", ["load", "cost model", "balance"], rows)
    rows = []
    for load in SENSITIVITY_LOADS:
        for seed in (base["seed"], *EXTRA_SEEDS):
            ref = find(dp=SIDE_DP, load=load, seed=seed, balance="off")
            for mode in ("off", "on"):
                r = find(dp=SIDE_DP, load=load, seed=seed, balance=mode)
                if r:
                    rows.append(([f"{load:g}", str(seed), mode], r, ref))
    return lines + _table("Seeds", ["load", "seed", "balance"], rows)


def _plots(find: Callable[..., Result | None], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    styles = {"off": ("tab:gray", "o"), "on": ("tab:blue", "s"), "throttle": ("tab:orange", "^")}
    styles[OLD_LABEL] = ("tab:purple", "x")
    variants = dict(_headline_variants())
    fig, axes = plt.subplots(2, len(DPS), figsize=(4.2 * len(DPS), 7), squeeze=False)
    for col, dp in enumerate(DPS):
        for mode, (color, marker) in styles.items():
            pts = [(ld, find(dp=dp, load=ld, **variants[mode])) for ld in LOADS]
            xs = [ld for ld, r in pts if r]
            rs = [r for _, r in pts if r]
            axes[0][col].plot(xs, [r["throughput_tok_s"] for r in rs], color=color, marker=marker, label=mode)
            axes[1][col].plot(xs, [r["ttft_p99_s"] for r in rs], color=color, marker=marker, label=mode)
        axes[0][col].set_title(f"DP {dp}")
        axes[0][col].set_ylabel("output tok/s (simulated time)")
        axes[1][col].set_ylabel("TTFT p99 (s)")
        axes[1][col].set_yscale("log")
        axes[1][col].yaxis.set_major_formatter(ScalarFormatter())
        axes[1][col].yaxis.set_minor_formatter(NullFormatter())
        axes[1][col].set_xlabel("load (x balance-off capacity)")
        axes[0][col].legend()
    fig.suptitle("Poisson arrivals, vLLM score routing")
    fig.tight_layout()
    fig.savefig(out / "value_sim_load.png", dpi=90)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for dp in DPS:
        on = [found for ld in LOADS if (found := find(dp=dp, load=ld, balance="on")) is not None]
        ax.plot([r["load"] for r in on], [r["frozen_fraction"] for r in on], marker="s", label=f"DP {dp}")
    ax.set_xlabel("load (x balance-off capacity)")
    ax.set_ylabel("fraction of steps frozen (balance on)")
    ax.set_ylim(0, 1)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "value_sim_frozen.png", dpi=90)
    plt.close(fig)
    _link_plot(find, out, plt)


def _link_plot(find: Callable[..., Result | None], out: Path, plt: Any) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    colors = dict(zip(LINK_DPS, ("tab:green", "tab:blue", "tab:red"), strict=False))
    for dp in LINK_DPS:
        ref = find(dp=dp, load=LINK_LOAD, balance="off")
        if ref is None:
            continue
        for gather, style in zip(LINK_GATHERS, ("-", "--"), strict=True):
            pts = _link_points(find, dp, gather)
            gains = [100 * (r["throughput_tok_s"] / ref["throughput_tok_s"] - 1) for _, r in pts]
            ax.plot([link for link, _ in pts], gains, style, color=colors[dp], marker="o", label=f"DP {dp}, {gather}")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xscale("symlog", linthresh=50)
    ax.set_xticks(list(LINK_US))
    ax.set_xticklabels([f"{link:g}" for link in LINK_US])
    ax.set_xlabel("one-way link latency between DP ranks (us)")
    ax.set_ylabel(f"output tok/s vs balance off (%), load {LINK_LOAD:g}")
    ax.set_title("Balance's gain after paying its per-step gather")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "value_sim_link.png", dpi=90)
    plt.close(fig)


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

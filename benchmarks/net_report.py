"""``make bench-net``'s report: rounds, CPU shares, fitted models and the per-step cost at DP 32 and 128.

Pure functions of the samples ``benchmarks.net_collective`` summarized (``net_collective.json``), so
the report can be re-rendered without rerunning (``--render-only``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from balance_dev.value_sim.collective import MODELS, GatherModel, Line, fit
from benchmarks.common import table

COLLECTIVES = ("all_gather", "all_reduce", "group_max", "group_max_tcp")
LABELS = {
    "all_gather": "all_gather + max (first)",
    "all_reduce": "all_reduce MAX",
    "group_max": "group_max over gloo (before)",
    "group_max_tcp": "group_max over TCP (now)",
}
NOW = "group_max_tcp"  # what balance_gather() runs: the goal column and the headline
LINK_US = 50.0
DECODE_STEP_MS = 30.0
GOALS_MS = {32: 0.5, 128: 1.0}  # issue 17: balance's per-step network cost at DP 32 and DP 128, 50 us links
MEASURED_DP = 32
EXTRAPOLATED_DP = 128


def _ok(sizes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in sizes if "error" not in s]


def _key(delay: float) -> str:
    return repr(float(delay))


def median_ms(size: dict[str, Any], delay: float, name: str) -> float:
    return float(size["phases"][_key(delay)]["collectives"][name]["median_ms"])


def cpu_us(size: dict[str, Any], name: str) -> float:
    """CPU per rank per call with no delay."""
    return float(size["phases"][_key(0.0)]["collectives"][name]["cpu_us"])


def rounds(size: dict[str, Any], delay: float, name: str) -> float:
    """Sequential one-way delays the call waits for: its extra time per unit of added delay."""
    return (median_ms(size, delay, name) - median_ms(size, 0.0, name)) / delay


def slope_rounds(size: dict[str, Any], delays: list[float], name: str) -> float:
    """Rounds from the two largest delays: (t(d2) - t(d1)) / (d2 - d1).

    With N ranks on 2 cores the 0 ms time of a large group is mostly waiting for a core, and part of
    that wait hides inside an added delay, so (t(d) - t(0)) / d under-counts. Between two delays long
    enough that every rank waits on the network, not for a core, the slope counts the rounds alone.
    """
    d1, d2 = sorted(delays)[-2:]
    return (median_ms(size, d2, name) - median_ms(size, d1, name)) / (d2 - d1)


def fitted(data: dict[str, Any]) -> dict[str, tuple[Line, Line]]:
    """Per collective: (rounds, CPU) lines in the model's scale of N, from this run."""
    sizes = _ok(data["sizes"])
    delays = [float(d) for d in data["delays_ms"]]
    out = {}
    for name in COLLECTIVES:
        model = MODELS[name]
        xs = [model.scale(s["world"]) for s in sizes]
        out[name] = (
            fit(xs, [slope_rounds(s, delays, name) for s in sizes]),
            fit(xs, [cpu_us(s, name) for s in sizes]),
        )
    return out


def size_line(size: dict[str, Any]) -> str:
    """One progress line per group size, while the benchmark runs."""
    delays = sorted(float(d) for d in size["phases"])
    parts = []
    for name in COLLECTIVES:
        times = " / ".join(f"{median_ms(size, d, name):.2f}" for d in delays)
        parts.append(f"{name} {times} ms, {rounds(size, delays[-1], name):.1f} rounds")
    return f"  N={size['world']}: " + "; ".join(parts) + f" ({size['wall_s']:.0f} s)"


def _line_text(line: Line, scale: str) -> str:
    return f"{line.fixed:.3g} + {line.slope:.3g} x {scale}"


def per_step(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per collective: the cost per step at DP 32 (measured here) and DP 128 (extrapolated), 50 us links."""
    sizes = {s["world"]: s for s in _ok(data["sizes"])}
    delays = [float(d) for d in data["delays_ms"]]
    lines = fitted(data)
    rows = []
    for name in COLLECTIVES:
        model = MODELS[name]
        for dp in (MEASURED_DP, EXTRAPOLATED_DP):
            if dp in sizes:
                n_rounds, cpu, source = slope_rounds(sizes[dp], delays, name), cpu_us(sizes[dp], name), "measured"
            else:
                rounds_line, cpu_line = lines[name]
                n_rounds = rounds_line.at(model.scale(dp))
                cpu, source = cpu_line.at(model.scale(dp)), "extrapolated"
            network_ms = n_rounds * LINK_US / 1000
            total = network_ms + cpu / 1000
            rows.append(
                {
                    "collective": name,
                    "dp": dp,
                    "source": source,
                    "rounds": n_rounds,
                    "theory": model.theory(dp),
                    "cpu_ms": cpu / 1000,
                    "network_ms": network_ms,
                    "step_ms": total,
                    "goal_ms": GOALS_MS[dp],
                }
            )
    return rows


def _meets(ms: float, goal_ms: float) -> str:
    return "yes" if ms <= goal_ms else "**no**"


def render(data: dict[str, Any]) -> str:
    sizes = data["sizes"]
    ok = _ok(sizes)
    delays = [float(d) for d in data["delays_ms"]]
    d1, d2 = sorted(delays)[-2:]
    out = [
        "# The per-step collective across a network delay",
        "",
        "Generated by `make bench-net` (`python -m benchmarks.net_collective`; root and network namespaces); "
        "the method is in docs/benchmarks.md.",
        f"{data['cores']} cores, torch {data['torch']}. Whole run: {data['wall_s']:.0f} s. Every figure is a median "
        f"of {data['iters']} calls; a call's time runs from the moment the last rank calls it to the moment the "
        "last rank returns.",
        "",
    ]
    failed = [s for s in sizes if "error" in s]
    if failed:
        out += ["**Group sizes that did not run:**", ""]
        out += [f"- N={s['world']}: `{s['error']}`" for s in failed]
        out.append("")
    wrong = [s for s in ok if s["error_count"]]
    if wrong:
        out += ["**Wrong maxima:**", ""]
        out += [f"- N={s['world']}: {s['error_count']} wrong, e.g. {s['errors'][0]}" for s in wrong]
        out.append("")
    out += [
        "## The link: one-way delay the ranks see (half a 1-byte TCP round trip between ranks 0 and 1, us)",
        "",
        table(
            ["N", *(f"set {d:g} ms" for d in delays)],
            [[s["world"], *(f"{s['phases'][_key(d)]['link_one_way_us']:.0f}" for d in delays)] for s in ok],
        ),
        "",
        "At 0 ms this is the path through two network stacks and the relay. The relay adds the set delay on top.",
        "",
        "## Time per call, rounds and CPU",
        "",
        "rounds @d = (time at d - time at 0) / d: the one-way delays the call waits for one after the other. "
        f"rounds {d1:g}->{d2:g} ms = (time at {d2:g} - time at {d1:g}) / {d2 - d1:g}: the same count, free of the "
        "CPU inflation of the 0 ms time (N ranks share 2 cores), so the models below use it. "
        "CPU: process time one rank spends per call at 0 ms (all its threads), median over ranks and calls.",
        "",
    ]
    rows = []
    for s in ok:
        for name in COLLECTIVES:
            rows.append(
                [
                    s["world"],
                    LABELS[name],
                    *(f"{median_ms(s, d, name):.2f}" for d in delays),
                    *(f"{rounds(s, d, name):.1f}" for d in delays[1:]),
                    f"**{slope_rounds(s, delays, name):.1f}**",
                    MODELS[name].theory(s["world"]),
                    f"{cpu_us(s, name):.0f}",
                ]
            )
    out += [
        table(
            [
                "N",
                "collective",
                *(f"{d:g} ms (ms)" for d in delays),
                *(f"rounds @{d:g}" for d in delays[1:]),
                f"rounds {d1:g}->{d2:g} ms",
                "rounds in theory",
                "CPU us/call/rank",
            ],
            rows,
        ),
        "",
        "Two cores run N ranks and the relay: at 0 ms and large N the times are mostly waiting for a core "
        "(CPU-inflated), so read the rounds, which are differences, and the per-rank CPU, not the 0 ms times.",
        "",
    ]
    if not can_fit(data):
        out += ["No models and no per-step figures: they need two group sizes that ran.", ""]
        return "\n".join(out)
    out += [
        f"## Models fitted to this run (rounds from the {d1:g} -> {d2:g} ms slope, CPU from the 0 ms phase)",
        "",
    ]
    lines = fitted(data)
    model_rows = []
    for name in COLLECTIVES:
        model: GatherModel = MODELS[name]
        rounds_line, cpu_line = lines[name]
        model_rows.append(
            [
                LABELS[name],
                model.theory_text,
                _line_text(rounds_line, model.scale_text),
                _line_text(cpu_line, model.scale_text),
                f"{_line_text(model.rounds, model.scale_text)}; {_line_text(model.cpu_us, model.scale_text)}",
            ]
        )
    out += [
        table(
            ["collective", "rounds in theory", "rounds (fit)", "CPU us (fit)", "value simulator uses (rounds; CPU us)"],
            model_rows,
        ),
        "",
        f"## Per step at DP {MEASURED_DP} and DP {EXTRAPOLATED_DP}, {LINK_US:g} us links, "
        f"next to a {DECODE_STEP_MS:g} ms decode step",
        "",
        f"DP {MEASURED_DP}: the rounds and CPU measured at N={MEASURED_DP}. DP {EXTRAPOLATED_DP} cannot run here: "
        "**extrapolated** with the fitted lines above. Per step = rounds x link + CPU (on a deployment each rank "
        "has its own core, so the CPU share is the per-rank figure, not the inflated 0 ms time).",
        "",
    ]
    step_rows = []
    for r in per_step(data):
        # The goal is the network cost; the whole step (with this machine's CPU share) is judged beside it.
        goal = (
            f"network <= {r['goal_ms']:g} ms: {_meets(r['network_ms'], r['goal_ms'])}; "
            f"whole step: {_meets(r['step_ms'], r['goal_ms'])}"
        )
        step_rows.append(
            [
                LABELS[r["collective"]],
                r["dp"],
                r["source"],
                f"{r['rounds']:.1f} (theory {r['theory']})",
                f"{r['network_ms']:.2f}",
                f"{r['cpu_ms']:.2f}",
                f"{r['step_ms']:.2f}",
                f"{100 * r['step_ms'] / DECODE_STEP_MS:.1f}%",
                goal if r["collective"] == NOW else "",
            ]
        )
    out += [
        table(
            [
                "collective",
                "DP",
                "from",
                "rounds",
                "network ms",
                "CPU ms",
                "per step ms",
                f"of a {DECODE_STEP_MS:g} ms step",
                "goal (balance's gather)",
            ],
            step_rows,
        ),
        "",
    ]
    return "\n".join(out)


def can_fit(data: dict[str, Any]) -> bool:
    return len({s["world"] for s in _ok(data["sizes"])}) >= 2


def headline(data: dict[str, Any]) -> list[str]:
    """The per-step figures of the gather balance runs, for benchmarks/results/REPORT.md."""
    if not can_fit(data):
        return ["no per-step figures (fewer than two group sizes ran)"]
    return [
        f"DP {r['dp']} ({r['source']}): network {r['network_ms']:.2f} ms per step "
        f"(goal <= {r['goal_ms']:g} ms: {_meets(r['network_ms'], r['goal_ms'])}), "
        f"{r['step_ms']:.2f} ms with its CPU share ({_meets(r['step_ms'], r['goal_ms'])})"
        for r in per_step(data)
        if r["collective"] == NOW
    ]


def write(data: dict[str, Any], out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / "net_collective.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    text = render(data) + "\n"
    (out / "net_collective.md").write_text(text)
    return text

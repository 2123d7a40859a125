"""``make bench-serve``'s figures and tables: one measured load (``Load``) and its figures per step and per
token, and the markdown report from every load (``render``; ``--render-only`` re-renders from the JSON).

Pure: no server, no e2e module; ``benchmarks.serve`` measures the loads."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Load:
    """One measured load: the figures, summed over the DP ranks."""

    topology: str
    dp: int
    pin: str
    probe: str
    balance: bool
    run: int
    load: int
    wall_s: float
    tokens: int
    requests: int
    cpu: dict[str, float]
    counts: dict[str, int] = field(default_factory=dict)  # probe count mode, summed over ranks

    def fig(self) -> dict[str, float | None]:
        c, steps, it = self.counts, self.counts.get("steps"), self.counts.get("iterations")
        ec = self.cpu["engine_core"]
        f: dict[str, float | None] = {
            "wall_s": self.wall_s,
            "ec_cpu_s": ec,
            "worker_cpu_s": self.cpu["worker"],
            "api_cpu_s": self.cpu["api_server"],
            "ec_cpu_per_token_ms": 1e3 * ec / self.tokens,
            "steps": steps,
            "iterations": it,
            "frozen_steps": c.get("frozen_steps"),
            "ec_cpu_per_step_ms": 1e3 * ec / it if it else None,
            "worker_cpu_per_step_ms": 1e3 * self.cpu["worker"] / it if it else None,
        }
        if it:
            f["step_wall_ms"] = c["step_ns"] / it / 1e6
            f["sync_wall_ms"] = c["sync_ns"] / it / 1e6
            f["gather_wall_ms"] = c["gather_ns"] / it / 1e6
            f["gather_cpu_us"] = c["gather_cpu_ns"] / it / 1e3
            f["schedule_us"] = c["schedule_ns"] / steps / 1e3 if steps else None
            f["dummy_wall_ms"] = c["dummy_ns"] / it / 1e6
            # The iteration's wall on a rank: the step (or the dummy batch) plus the sync with the gather.
            loop = (c["step_ns"] + c["dummy_ns"] + c["sync_ns"]) / it
            f["iteration_wall_ms"] = loop / 1e6
            f["gather_share"] = c["gather_ns"] / it / loop if loop else None
            f["gather_cpu_share"] = c["gather_cpu_ns"] / it / loop if loop else None
        return f


ROWS = (
    ("wall_s", "wall s", "{:.1f}"),
    ("tokens", "tokens", "{:.0f}"),
    ("ec_cpu_s", "engine-core CPU s", "{:.2f}"),
    ("steps", "steps (schedule)", "{:.0f}"),
    ("iterations", "iterations (steps + dummy)", "{:.0f}"),
    ("frozen_steps", "frozen steps", "{:.0f}"),
    ("ec_cpu_per_step_ms", "engine-core CPU per iteration ms", "{:.2f}"),
    ("ec_cpu_per_token_ms", "engine-core CPU per token ms", "{:.2f}"),
    ("worker_cpu_s", "worker CPU s", "{:.2f}"),
    ("worker_cpu_per_step_ms", "worker CPU per iteration ms", "{:.2f}"),
    ("api_cpu_s", "API server CPU s", "{:.2f}"),
    ("iteration_wall_ms", "iteration wall ms (in the engine core)", "{:.2f}"),
    ("schedule_us", "schedule() us", "{:.0f}"),
    ("sync_wall_ms", "sync + gather wall ms per iteration", "{:.3f}"),
    ("gather_wall_ms", "gather wall ms per iteration", "{:.3f}"),
    ("gather_cpu_us", "gather thread CPU us per iteration", "{:.0f}"),
    ("gather_share", "gather wall / iteration", "{:.1%}"),
    ("gather_cpu_share", "gather CPU / iteration", "{:.2%}"),
)


def fig_of(load: dict[str, Any]) -> dict[str, float | None]:
    fields = {k: load[k] for k in Load.__dataclass_fields__}
    f = Load(**fields).fig()
    f["tokens"] = load["tokens"]
    return f


def med(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def render(loads: list[dict[str, Any]], header: str) -> str:
    groups: dict[tuple[str, int, str, str], list[dict[str, Any]]] = {}
    for load in loads:
        groups.setdefault((load["topology"], load["dp"], load["pin"], load["probe"]), []).append(load)
    out = [header, ""]
    summary = []
    for (topo, dp, pin, probe), group in groups.items():
        title = f"{topo}, DP {dp}, {'each rank on a core of its own' if pin == 'cores' else 'unpinned'}, probe {probe}"
        cols = [(g, fig_of(g)) for g in sorted(group, key=lambda g: (g["run"], g["load"]))]
        out.append(f"### {title}")
        out.append("")
        heads = [f"run {g['run']}.{g['load']} {'on' if g['balance'] else 'off'}" for g, _ in cols]
        out.append("| figure | " + " | ".join(heads) + " | median on | median off | on/off |")
        out.append("|---|" + "---|" * (len(heads) + 3))
        row_sum = {}
        for key, label, fmt in ROWS:
            vals = [f.get(key) for _, f in cols]
            if all(v is None for v in vals):
                continue
            on = med([f.get(key) for g, f in cols if g["balance"]])
            off = med([f.get(key) for g, f in cols if not g["balance"]])
            ratio = f"{on / off:.2f}x" if on is not None and off else ""
            row_sum[key] = (on, off)
            cells = [fmt.format(v) if v is not None else "" for v in vals]
            cell_on = fmt.format(on) if on is not None else ""
            cell_off = fmt.format(off) if off is not None else ""
            out.append(f"| {label} | " + " | ".join(cells) + f" | {cell_on} | {cell_off} | {ratio} |")
        out.append("")
        summary.append((title, row_sum))
    lines = [
        "| topology | wall on/off | engine-core CPU per load | steps | iterations | frozen steps (on) | "
        "engine-core CPU per iteration | per token | worker CPU | gather wall / CPU per iteration (on) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def pair(row: dict[str, tuple[Any, Any]], key: str, fmt: str) -> str:
        on, off = row.get(key, (None, None))
        if on is None or off is None:
            return ""
        return f"{fmt.format(on)} / {fmt.format(off)} ({on / off:.2f}x)" if off else f"{fmt.format(on)} / {off}"

    for title, row in summary:
        g_on = row.get("gather_wall_ms", (None, None))[0]
        gc_on = row.get("gather_cpu_us", (None, None))[0]
        share = row.get("gather_share", (None, None))[0]
        gather = f"{g_on:.3f} ms ({share:.1%}) / {gc_on:.0f} us" if g_on is not None and share is not None else ""
        frozen = row.get("frozen_steps", (None, None))[0]
        lines.append(
            f"| {title} | {pair(row, 'wall_s', '{:.1f} s')} | {pair(row, 'ec_cpu_s', '{:.2f} s')} | "
            f"{pair(row, 'steps', '{:.0f}')} | {pair(row, 'iterations', '{:.0f}')} | "
            f"{'' if frozen is None else f'{frozen:.0f}'} | {pair(row, 'ec_cpu_per_step_ms', '{:.2f} ms')} | "
            f"{pair(row, 'ec_cpu_per_token_ms', '{:.2f} ms')} | {pair(row, 'worker_cpu_s', '{:.2f} s')} | {gather} |"
        )
    return "\n".join([*out[:2], "## Summary (medians, on / off)", "", *lines, "", "## Every load", "", *out[2:]])

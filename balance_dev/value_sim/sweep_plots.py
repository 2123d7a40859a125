"""The sweep's plots: throughput and TTFT p99 against load, the frozen fraction, the gain against link latency."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from balance_dev.value_sim.sweep_plan import (
    DPS,
    LINK_DPS,
    LINK_GATHERS,
    LINK_LOAD,
    LINK_US,
    LOADS,
    OLD_LABEL,
    Result,
    headline_variants,
    link_points,
)


def plots(find: Callable[..., Result | None], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    styles = {"off": ("tab:gray", "o"), "on": ("tab:blue", "s"), "throttle": ("tab:orange", "^")}
    styles[OLD_LABEL] = ("tab:purple", "x")
    variants = dict(headline_variants())
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
            pts = link_points(find, dp, gather)
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

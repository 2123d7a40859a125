"""What the standard sweep runs, as data: the DP sizes, loads, balance modes, gathers, links, side studies and
cost variants (``plan``), and the capacity probes their loads are relative to (``capacity_probes``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from balance_dev.value_sim.config import SimConfig
from balance_dev.value_sim.cost import CostModel

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


def cost_name(cost: CostModel) -> str:
    return next((name for name, c in COST_VARIANTS.items() if c == cost), "default")


def headline_variants() -> list[tuple[str, dict[str, Any]]]:
    variants: list[tuple[str, dict[str, Any]]] = [(mode, {"balance": mode}) for mode in HEADLINE_MODES]
    variants.insert(2, (OLD_LABEL, {"balance": "on", "gather": OLD_GATHER}))
    return variants


def link_points(find: Callable[..., Result | None], dp: int, gather: str) -> list[tuple[float, Result]]:
    found = [(link, find(dp=dp, load=LINK_LOAD, balance="on", gather=gather, link_us=link)) for link in LINK_US]
    return [(link, r) for link, r in found if r is not None]

"""The gather's per-step cost: its model, its fit to ``make bench-net``'s measurements, and its charge per step."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from balance_dev.value_sim import sweep_report
from balance_dev.value_sim.collective import GATHERS, MODELS, GatherModel, Line, fit, gather_step_ms
from balance_dev.value_sim.config import SimConfig
from balance_dev.value_sim.cost import CostModel
from balance_dev.value_sim.model import Simulation
from tests.value_sim.test_simulation import SMALL

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "net_collective.json"


def test_theory_rounds_are_the_algorithms() -> None:
    for n in range(2, 300):
        assert MODELS["group_max"].theory(n) == math.ceil(math.log2(n)) + 1  # dissemination + the announcement
        assert MODELS["all_gather"].theory(n) == MODELS["all_reduce"].theory(n) == 2 * (n - 1)  # gloo's rings
    for model in MODELS.values():
        assert model.rounds_at(1) == model.cpu_us_at(1) == model.step_ms(1, 1000.0) == 0.0  # no peer, no message


def test_the_gather_over_its_own_connections_is_the_cheapest_and_charges_the_engine_cores_extra() -> None:
    tcp = MODELS["group_max_tcp"]
    for n in (2, 3, 4, 8, 32, 128, 1024):
        assert tcp.theory(n) == math.ceil(math.log2(n))  # no receive announcement: one delay less
        for link in (0.0, 50.0, 1000.0):
            assert gather_step_ms("group_max_tcp", n, link) < gather_step_ms("group_max", n, link)
    # What bench-serve measured beyond bench-net is charged on every step, whatever the link.
    assert tcp.in_server_us > 0 and tcp.step_ms(2, 0.0) == pytest.approx((tcp.cpu_us_at(2) + tcp.in_server_us) / 1e3)


def test_step_cost_is_rounds_times_link_plus_cpu() -> None:
    model = GatherModel("m", lambda n: n, "N", lambda n: float(n), "N", Line(1.0, 2.0), Line(30.0, 10.0))
    # N=8: rounds 1 + 2*8 = 17, CPU 30 + 10*8 = 110 us; 50 us links: 17*50 + 110 = 960 us.
    assert model.step_ms(8, 50.0) == pytest.approx(0.96)
    assert model.step_ms(8, 0.0) == pytest.approx(0.11)
    negative = GatherModel("m", lambda n: n, "N", lambda n: float(n), "N", Line(-50.0, 1.0), Line(-500.0, 1.0))
    assert negative.step_ms(4, 50.0) == 0.0  # a fitted line below 0 is no saving
    assert gather_step_ms("none", 128, 1000.0) == 0.0
    with pytest.raises(ValueError):
        gather_step_ms("ring", 8, 50.0)
    with pytest.raises(ValueError):
        gather_step_ms("group_max", 8, -1.0)
    assert set(GATHERS) == {*MODELS, "none"}


def test_a_line_fits_exact_points_and_needs_two_x() -> None:
    line = fit([1, 2, 3, 5], [5.0, 7.0, 9.0, 13.0])
    assert line.fixed == pytest.approx(3.0) and line.slope == pytest.approx(2.0)
    with pytest.raises(ValueError):
        fit([2, 2], [1.0, 3.0])


def test_the_new_gather_is_cheaper_from_four_ranks_on() -> None:
    for n in (4, 8, 32, 128, 1024):
        for link in (0.0, 50.0, 1000.0):
            assert gather_step_ms("group_max_tcp", n, link) < gather_step_ms("all_gather", n, link)
        # over gloo, with what it cost more in a real engine core (unmeasured for all_gather): from 8 ranks on
        if n >= 8:
            assert gather_step_ms("group_max", n, 50.0) < gather_step_ms("all_gather", n, 50.0)
    # log-depth: from 32 to 1024 ranks the new gather grows by a few rounds, the old one by ~1800
    grow_new = gather_step_ms("group_max_tcp", 1024, 1000.0) - gather_step_ms("group_max_tcp", 32, 1000.0)
    grow_old = gather_step_ms("all_gather", 1024, 1000.0) - gather_step_ms("all_gather", 32, 1000.0)
    assert grow_new < 20 < 500 < grow_old


def test_the_models_reproduce_the_committed_measurements() -> None:
    """The simulator's lines against benchmarks/results/net_collective.json (rerun make bench-net: refit)."""
    data = json.loads(RESULTS.read_text())
    delays = sorted(float(d) for d in data["delays_ms"])
    d1, d2 = delays[-2:]
    sizes = [s for s in data["sizes"] if "error" not in s]
    assert [s["world"] for s in sizes][:5] == [2, 4, 8, 16, 32]
    for size in sizes:
        n = size["world"]
        for name, model in MODELS.items():
            phases = size["phases"]
            t1 = phases[repr(d1)]["collectives"][name]["median_ms"]
            t2 = phases[repr(d2)]["collectives"][name]["median_ms"]
            measured_rounds = (t2 - t1) / (d2 - d1)
            cpu = phases["0.0"]["collectives"][name]["cpu_us"]
            assert model.rounds_at(n) == pytest.approx(measured_rounds, rel=0.3, abs=1.5), (name, n)
            if name == "group_max" and n > 8:
                continue  # the gather over gloo keeps the previous run's CPU line (collective.py says why)
            assert model.cpu_us_at(n) == pytest.approx(cpu, rel=0.4, abs=100), (name, n)


# The simulation tests' small group, overloaded, every step 40 ms whatever it carries.
_FLAT = replace(SMALL, dp=4, seconds=6.0, capacity_req_s=8.0, load=1.5, cost=CostModel.flat(40.0))


def _gaps_ms(cfg: SimConfig) -> list[float]:
    sim = Simulation(cfg)
    sim.run()
    starts = [step.start for step in sim.steps]
    return [1000 * (b - a) for a, b in itertools.pairwise(starts)]


@pytest.mark.parametrize(
    ("balance", "gather", "link_us"), [("on", "all_gather", 1000.0), ("on+throttle", "group_max", 300.0)]
)
def test_every_balance_step_pays_the_gather(balance: str, gather: str, link_us: float) -> None:
    cfg = replace(_FLAT, balance=balance, gather=gather, link_us=link_us)
    expected = 40.0 + gather_step_ms(gather, 4, link_us)
    assert expected > 41.0  # the charge is large enough to tell apart
    gaps = _gaps_ms(cfg)
    # A busy group steps back to back: every gap is one step; only idle waits (none at 1.5x load) are longer.
    assert len(gaps) > 50 and min(gaps) == pytest.approx(expected)
    assert sum(1 for g in gaps if g == pytest.approx(expected)) > 0.95 * len(gaps)


@pytest.mark.parametrize("balance", ["off", "throttle"])
def test_without_balance_no_step_pays_a_gather(balance: str) -> None:
    cfg = replace(_FLAT, balance=balance, gather="all_gather", link_us=1000.0)
    assert min(_gaps_ms(cfg)) == pytest.approx(40.0)
    assert Simulation(cfg).gather_s == 0.0


def test_a_config_refuses_an_unknown_gather() -> None:
    with pytest.raises(ValueError):
        SimConfig(gather="tree")
    with pytest.raises(ValueError):
        SimConfig(link_us=-5.0)


def test_break_even_is_where_the_gain_crosses_zero() -> None:
    assert sweep_report.break_even_us([(0.0, 10.0), (50.0, 8.0), (200.0, 4.0), (1000.0, -4.0)]) == pytest.approx(600.0)
    assert sweep_report.break_even_us([(0.0, 10.0), (1000.0, 2.0)]) is None  # still ahead at the slowest link
    assert sweep_report.break_even_us([(0.0, -1.0), (50.0, -2.0)]) == 0.0  # no gain to lose

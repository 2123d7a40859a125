"""End-to-end runs on real vLLM schedulers: small DP, short horizons, each claim able to fail."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from balance_dev.value_sim import __main__ as cli
from balance_dev.value_sim import sweep, sweep_plan, sweep_report
from balance_dev.value_sim.collective import gather_step_ms
from balance_dev.value_sim.config import SimConfig
from balance_dev.value_sim.cost import CostModel
from balance_dev.value_sim.model import Simulation, simulate
from balance_dev.value_sim.workload import Lengths

SMALL = SimConfig(
    dp=2,
    cap=4,
    token_budget=512,
    seconds=12.0,
    seed=3,
    capacity_req_s=5.0,  # about the saturated rate of this group: load 1.5 overloads it
    lengths=Lengths(prompt_median=200, output_median=30),
)
REQUIRED = (
    "throughput_tok_s",
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "frozen_fraction",
    "prefill_step_fraction",
    "spread_mean",
)


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    skip = {"balance", "wall_s"}
    assert {k: v for k, v in a.items() if k not in skip} == {k: v for k, v in b.items() if k not in skip}


@pytest.mark.parametrize("balance", ["off", "on", "throttle", "on+throttle"])
@pytest.mark.parametrize("arrivals", ["poisson", "closed"])
def test_requests_are_conserved_and_the_cap_holds(balance: str, arrivals: str) -> None:
    r = simulate(replace(SMALL, balance=balance, arrivals=arrivals, load=1.5))
    assert r["arrived"] == r["finished"] + r["in_system"]  # nothing lost, nothing invented
    assert r["finished"] > 10 and r["max_running"] == 4  # the cap is reached and never exceeded
    if arrivals == "closed":
        assert r["in_system"] == r["closed_clients"] == 12


def test_a_frozen_step_admits_nothing_on_any_rank() -> None:
    sim = Simulation(replace(SMALL, balance="on", load=1.5))
    r = sim.run()
    assert r["frozen_fraction"] > 0.2  # the gate did close (not vacuous)
    assert r["admitted"] > 10 and r["admitted_while_frozen"] == 0
    assert sum(1 for s in sim.steps if s.frozen and s.waiting) > 10  # requests were held back


def test_the_freeze_is_what_the_previous_step_left() -> None:
    sim = Simulation(replace(SMALL, balance="on", load=1.5))
    sim.run()
    leader = max(len(s.running) for s in sim.ranks)  # the real schedulers' own count and field
    assert all(s.balance_running_count() == len(s.running) for s in sim.ranks)
    assert [s.balance_leader_running for s in sim.ranks] == [leader] * len(sim.ranks)
    for before, after in zip(sim.steps, sim.steps[1:], strict=False):
        assert after.frozen == before.cap_hit  # the gate reads the end-of-step counts, one step late


def test_balance_off_never_freezes_even_when_the_leader_is_at_the_cap() -> None:
    r = simulate(replace(SMALL, balance="off", load=1.5))
    assert r["cap_hit_fraction"] > 0.2 and r["frozen_fraction"] == 0.0


def test_on_and_off_are_identical_when_the_cap_is_never_reached() -> None:
    light = replace(SMALL, cap=64, load=0.5, gather="none")  # a free gather: the gate alone (its cost: test_collective)
    off, on = simulate(light), simulate(replace(light, balance="on"))
    assert off["cap_hit_fraction"] == 0.0 and off["finished"] > 5
    _same(off, on)


@pytest.mark.parametrize("arrivals", ["poisson", "closed"])
def test_with_a_flat_step_cost_balance_on_cannot_beat_off(arrivals: str) -> None:
    flat = replace(SMALL, cost=CostModel.flat(40.0), routing="rr", arrivals=arrivals, load=1.5, seconds=20.0)
    off, on = simulate(flat), simulate(replace(flat, balance="on"))
    assert on["frozen_fraction"] > 0.1  # the gate did bite
    assert on["throughput_tok_s"] <= off["throughput_tok_s"]
    assert on["ttft_p50_s"] >= off["ttft_p50_s"]


def test_the_throttle_flag_is_vllms_cadence() -> None:
    sim = Simulation(replace(SMALL, balance="throttle", prefill_interval=3))
    flags = []
    for counter in range(7):
        sim.engine.step_counter = counter
        flags.append(sim._should_throttle(sim.engine))
    assert flags == [False, True, True, False, True, True, False]
    assert not Simulation(replace(SMALL, balance="on"))._should_throttle(sim.engine)  # interval 1: never


def test_a_trace_file_drives_the_arrivals(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    rows = [{"arrival_s": 0.3 * i, "prompt_len": 50 + 10 * i, "output_len": 5 + i} for i in range(10)]
    trace.write_text("".join(json.dumps(row) + "\n" for row in rows))
    sim = Simulation(replace(SMALL, arrivals="trace", trace=str(trace), warmup_frac=0.0))
    r = sim.run()
    assert r["arrived"] == r["finished"] == 10
    assert sorted((q.arrival, q.prompt, q.output, q.emitted) for q in sim.reqs.values()) == [
        (0.3 * i, 50 + 10 * i, 5 + i, 5 + i) for i in range(10)
    ]


def test_an_idle_group_sleeps_and_the_finish_sync_tail_ends_waves() -> None:
    r = simulate(replace(SMALL, load=0.1, seconds=30.0))
    assert r["waves"] >= 2  # drained, stepped to the next finish sync, slept until the next arrival
    assert r["steps"] < 30.0 / 0.035  # it did not step through the idle time


def test_cli_json_has_the_required_keys_and_sane_values(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--dp", "2", "--cap", "4", "--token-budget", "512", "--arrivals", "poisson", "--load", "0.8"]
    args += ["--routing", "score", "--staleness-ms", "100", "--balance", "on", "--seconds", "8", "--seed", "2"]
    args += ["--capacity-req-s", "2.0", "--prompt-median", "200", "--output-median", "30", "--json"]
    args += ["--gather", "all_gather", "--link-us", "200"]
    assert cli.main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["gather"] == "all_gather" and result["link_us"] == 200.0
    assert result["gather_ms_per_step"] == pytest.approx(gather_step_ms("all_gather", 2, 200.0))
    assert result["gather_ms_per_step"] > 0.4  # 2 ranks: about 2 rounds x 200 us, plus CPU
    for key in REQUIRED:
        assert isinstance(result[key], float), key
    assert result["throughput_tok_s"] > 0 and result["finished"] > 0
    assert 0 < result["ttft_p50_s"] <= result["ttft_p99_s"] < 8
    assert 0 < result["tpot_p50_ms"] <= result["tpot_p99_ms"] < 1000
    assert 0 <= result["frozen_fraction"] <= 1 and 0 < result["prefill_step_fraction"] <= 1
    assert result["spread_mean"] >= 0 and result["balance"] == "on" and result["dp"] == 2


def _fake(dp: int, load: float, balance: str, throughput: float, **extra: Any) -> dict[str, Any]:
    r: dict[str, Any] = {k: 0.5 for k in REQUIRED}
    r.update(
        dp=dp, load=load, balance=balance, arrivals="poisson", routing="score", staleness_ms=100.0,
        seed=1, cost=asdict(CostModel()), gather="group_max_tcp", link_us=50.0, gather_ms_per_step=0.3,
        e2e_p99_s=2.0, cap_hit_fraction=0.3, queues_stable=load < 1.1, wall_s=1.0, throughput_tok_s=throughput,
    )  # fmt: skip
    return {**r, **extra}


def test_the_report_renders_tables_and_plots(tmp_path: Path) -> None:
    results = []
    for dp in sweep_plan.DPS:
        for load in sweep_plan.LOADS:
            for mode in sweep_plan.HEADLINE_MODES:
                results.append(_fake(dp, load, mode, 100.0 * load * (1.1 if mode == "on" else 1.0)))
            results.append(_fake(dp, load, "on", 100.0 * load * 1.05, gather=sweep_plan.OLD_GATHER))
    for dp in sweep_plan.LINK_DPS:
        if dp not in sweep_plan.DPS:
            results.append(_fake(dp, 1.2, "off", 120.0))
        for gather in sweep_plan.LINK_GATHERS:
            for link in sweep_plan.LINK_US:
                if link == 50.0 and dp in sweep_plan.DPS:  # the headline holds both gathers at 50 us
                    continue
                if link == 50.0:
                    gain = 10.0 if gather == "group_max_tcp" else 5.0
                else:
                    # gain +10% at 0 us, falling 1% per 100 us (group_max_tcp) or per 20 us (all_gather)
                    gain = 10 - link / (100 if gather == "group_max_tcp" else 20)
                fake = _fake(dp, 1.2, "on", 120.0 * (1 + gain / 100), gather=gather, link_us=link)
                results.append(fake)
    base = sweep._cfg_dict(SimConfig())
    cap = {"dp": 2, "capacity_req_s": 1.0, "throughput_tok_s": 10.0, "step_ms_mean": 40.0}
    data = {"base": base, "capacity": [{**cap, "prefill_step_fraction": 0.2, "wall_s": 1.0}], "results": results}
    text = sweep_report.render({**data, "wall_s": 12.0, "jobs": 2}, tmp_path)
    assert "| 32 | 1 | on | 110 | +10.0% |" in text
    assert "| 32 | 1 | on, all_gather | 105 | +5.0% |" in text
    assert "| 8 | group_max_tcp | 1000 | 0.30 | 120 | +0.0% |" in text
    # all_gather: +10% at 0 us, +5% at 50 (the headline's), 0% at 200: the gain ends at 200 us
    assert "| 32 | all_gather | +10.0% | +5.0% | +0.0% | -40.0% | up to about 200 us |" in text
    assert "| 32 | group_max_tcp | +10.0% | +10.0% | +8.0% | +0.0% | up to about 1000 us |" in text
    assert "| 128 | all_gather | +10.0% | +5.0% | +0.0% | -40.0% | up to about 200 us |" in text
    assert "**no**" in text  # unstable queues are flagged
    assert (tmp_path / "value_sim.md").read_text() == text
    for png in ("value_sim_load.png", "value_sim_frozen.png", "value_sim_link.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

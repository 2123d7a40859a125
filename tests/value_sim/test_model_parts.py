"""The simulator's parts on their own: routing, snapshots, step time, arrivals, the gate's input."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from pathlib import Path

import pytest

from balance_dev.value_sim.cost import CostModel, RankLoad
from balance_dev.value_sim.ranks import deliver_gather, leader_count
from balance_dev.value_sim.routing import Coordinator, Router, engine_entry
from balance_dev.value_sim.workload import Lengths, bursty_times, load_trace, poisson_times


class _ScoreOracle:
    """vLLM's score routing written out from its source, one front-end (client_count 1), per family.

    The coordinator's entry shape tells the family: ``[waiting, running]`` is 0.22-0.24 (``waiting * 4 +
    running``, scan from index 0), ``[waiting, running, kv_cache_usage]`` is 0.27 on (``max(in-flight,
    waiting + running)`` plus ``waiting * 6 * max(0, kv - 0.5)``, the scan start rotating after each pick).
    """

    def __init__(self, dp: int) -> None:
        self.fields = len(engine_entry())
        self.start = 0
        self.inflight = [0] * dp

    def score(self, i: int, entry: list[int | float]) -> float:
        if self.fields == 2:
            waiting, running = entry
            return waiting * 4 + running
        waiting, running, kv = entry
        return max(self.inflight[i], waiting + running) + waiting * 6.0 * max(0.0, kv - 0.5)

    def choose(self, counts: list[list[int | float]]) -> int:
        order = [(self.start + k) % len(counts) for k in range(len(counts))]
        best = min(order, key=lambda i: (self.score(i, counts[i]), order.index(i)))
        self.inflight[best] += 1
        if self.fields == 3:
            self.start = (self.start + 1) % len(counts)
        return best

    def finished(self, engine: int) -> None:
        self.inflight[engine] -= 1


def _random_entry(rng: random.Random) -> list[int | float]:
    return engine_entry(rng.randrange(5), rng.randrange(9), rng.choice([0.0, 0.3, 0.6, 0.9, 1.0]))


def test_the_entry_shape_is_the_installed_coordinators() -> None:
    from vllm.v1.engine.coordinator import EngineState

    assert len(engine_entry(3, 2, 0.75)) == len(EngineState().request_counts)
    assert engine_entry(3, 2, 0.75)[:2] == [3, 2]  # coordinator.py: stats[0] = waiting, stats[1] = running


def test_score_routing_is_vllms_formula_with_the_local_bump() -> None:
    rng = random.Random(3)
    router, oracle = Router("score", 6, random.Random(0)), _ScoreOracle(6)
    live: list[tuple[str, int]] = []
    for n in range(300):
        counts = [_random_entry(rng) for _ in range(6)]
        router.snapshot(counts)
        expected = oracle.choose([list(c) for c in counts])
        assert router.choose(f"r{n}") == expected
        assert router.client.lb_engines[expected][0] == counts[expected][0] + 1  # client_count == 1
        live.append((f"r{n}", expected))
        if rng.random() < 0.4:  # finishes lower the in-flight floor (0.27 on)
            rid, engine = live.pop(rng.randrange(len(live)))
            router.finished(rid)
            oracle.finished(engine)
    # Between snapshots the bumps alone spread a burst over idle engines.
    burst = Router("score", 6, random.Random(0))
    burst.snapshot([engine_entry()] * 6)
    assert [burst.choose(f"b{i}") for i in range(12)] == list(range(6)) * 2


def test_score_routing_calls_vllm_and_frees_in_flight_on_finish() -> None:
    router = Router("score", 3, random.Random(0))
    router.choose("a")
    assert router.client.reqs_in_flight == {"a": 0}  # written by vLLM's get_core_engine_for_request
    router.finished("a")  # vLLM's process_engine_outputs
    assert router.client.reqs_in_flight == {}
    assert sum(router.client.engine_inflight.values()) == 0  # read only from 0.27 on, kept exact anyway


def test_rr_and_random_routing() -> None:
    rr = Router("rr", 3, random.Random(0))
    assert [rr.choose(str(i)) for i in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    rand = Router("random", 4, random.Random(0))
    picks = [rand.choose(str(i)) for i in range(400)]
    assert set(picks) == {0, 1, 2, 3} and max(picks.count(i) for i in range(4)) < 150
    with pytest.raises(ValueError):
        Router("p2c", 2, random.Random(0))


def test_coordinator_publishes_the_latest_counts_at_its_interval_and_keeps_bumps_between() -> None:
    e = engine_entry
    router = Router("score", 2, random.Random(0))
    coord = Coordinator(0.1, 2)
    coord.engines_published(0.01, [e(3, 1), e()])
    coord.refresh(0.05, router)  # no publication yet: the client still has its initial counts
    assert router.client.lb_engines == [e(), e()]
    coord.engines_published(0.12, [e(5, 5), e()])  # after the 0.1 s instant
    coord.refresh(0.15, router)  # the 0.1 s publication carries what engines had published by then
    assert router.client.lb_engines == [e(3, 1), e()]
    router.choose("a")  # local bump on engine 1
    coord.refresh(0.19, router)  # same instant: the bump survives
    assert router.client.lb_engines == [e(3, 1), e(1, 0)]
    coord.refresh(0.21, router)
    assert router.client.lb_engines == [e(5, 5), e()]
    coord.refresh(0.35, router)  # nothing changed since: no publication, bumps would survive
    router.choose("b")
    coord.refresh(0.45, router)
    assert router.client.lb_engines == [e(5, 5), e(1, 0)]
    coord.refresh(5.3, router)  # the 5 s heartbeat re-publishes unchanged counts
    assert router.client.lb_engines == [e(5, 5), e()]


def test_zero_staleness_sees_the_latest_counts() -> None:
    router = Router("score", 2, random.Random(0))
    coord = Coordinator(0.0, 2)
    coord.engines_published(0.5, [engine_entry(0, 4), engine_entry(2, 0)])
    coord.refresh(0.5, router)
    assert router.client.lb_engines == [engine_entry(0, 4), engine_entry(2, 0)]


def test_step_time_is_the_slowest_rank_plus_shared_expert_work() -> None:
    cost = CostModel(base_ms=10, token_ms=0.1, context_us=1.0, prefill_ms=4, expert_token_ms=0.2)
    decode = RankLoad(tokens=8, prefill_tokens=0, context=8000)
    prefill = RankLoad(tokens=1000, prefill_tokens=992, context=1500)
    assert cost.rank_ms(RankLoad()) == 10  # a dummy batch
    assert cost.rank_ms(decode) == pytest.approx(10 + 0.8 + 8)
    assert cost.rank_ms(prefill) == pytest.approx(10 + 100 + 1.5 + 4)
    step = cost.step_s([decode, prefill, RankLoad()])
    assert step == pytest.approx((10 + 100 + 1.5 + 4 + 0.2 * 1008 / 3) / 1000)
    # One rank's prefill slows every rank: the step is no faster with the prefill elsewhere.
    assert cost.step_s([prefill, decode, decode]) > cost.step_s([decode, decode, decode])
    flat = CostModel.flat(40)
    assert flat.step_s([prefill, decode]) == flat.step_s([RankLoad()]) == pytest.approx(0.04)


def test_default_costs_match_the_cited_figures() -> None:
    cost = CostModel()
    # About 0.11 ms per prompt token per GPU (73.7k tokens/s per 8-GPU node), expert work spread evenly.
    assert cost.token_ms + cost.expert_token_ms == pytest.approx(1 / (73_700 / 8) * 1000, rel=0.05)
    # A full decode batch of 16 at ~500 tokens of context: a step of 45-50 ms (20-22 tokens/s per user).
    full = RankLoad(tokens=16, context=16 * 500)
    assert 38 <= 1000 * cost.step_s([full] * 8) <= 50


def test_poisson_and_bursty_arrivals_have_the_asked_rate_and_bursty_is_overdispersed() -> None:
    rng = random.Random(11)
    seconds, rate = 2000.0, 5.0
    poisson = poisson_times(rng, rate, seconds)
    bursty = bursty_times(rng, rate, seconds, burst_mean=8.0)
    assert len(poisson) / seconds == pytest.approx(rate, rel=0.03)
    assert len(bursty) / seconds == pytest.approx(rate, rel=0.08)
    assert all(0 <= t < seconds for t in poisson + bursty) and poisson == sorted(poisson)

    def dispersion(times: list[float]) -> float:  # variance / mean of counts per 1 s window
        counts = [0] * int(seconds)
        for t in times:
            counts[int(t)] += 1
        return statistics.pvariance(counts) / statistics.fmean(counts)

    assert 0.85 < dispersion(poisson) < 1.15  # Poisson: index of dispersion 1
    assert dispersion(bursty) > 5  # compound Poisson with geometric bursts of mean 8: about 15
    gaps = [b - a for a, b in itertools.pairwise(poisson)]
    assert statistics.fmean(gaps) == pytest.approx(1 / rate, rel=0.03)
    assert statistics.pstdev(gaps) == pytest.approx(1 / rate, rel=0.06)  # exponential: sd == mean


def test_lengths_are_lognormal_with_the_asked_medians_and_fit_the_model() -> None:
    lengths = Lengths(prompt_median=300, prompt_sigma=0.7, output_median=80, output_sigma=0.9)
    rng = random.Random(5)
    draws = [lengths.draw(rng) for _ in range(5000)]
    assert statistics.median(p for p, _ in draws) == pytest.approx(300, rel=0.06)
    assert statistics.median(o for _, o in draws) == pytest.approx(80, rel=0.06)
    assert all(p >= 1 and o >= 1 and p + o <= lengths.max_model_len for p, o in draws)
    logs = [math.log(p) for p, _ in draws if 1 < p < lengths.max_model_len * 3 // 4]
    assert statistics.pstdev(logs) == pytest.approx(0.7, rel=0.08)


def test_trace_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rows = [
        '{"arrival_s": 1.5, "prompt_len": 20, "output_len": 3}',
        "",
        '{"arrival_s": 0.5, "prompt_len": 9, "output_len": 1}',
    ]
    path.write_text("\n".join(rows) + "\n")
    assert load_trace(path) == [(0.5, 9, 1), (1.5, 20, 3)]


class _FakeRank:
    def __init__(self, running: int, cap: int) -> None:
        self.running = [object()] * running
        self.max_num_running_reqs = cap
        self.balance_leader_running = 0

    def balance_running_count(self) -> int:
        return len(self.running)


def test_the_gate_reads_the_end_of_step_leader_on_every_rank() -> None:
    ranks = [_FakeRank(2, 4), _FakeRank(4, 4), _FakeRank(0, 4)]
    deliver_gather(ranks)
    assert [leader_count(r) for r in ranks] == [4, 4, 4]
    ranks[1].running = ranks[1].running[:3]
    deliver_gather(ranks)
    assert [leader_count(r) for r in ranks] == [3, 3, 3]

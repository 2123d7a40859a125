"""The simulator: a DP group in lockstep, a real vLLM scheduler per rank, vLLM's routing, simulated time.

What each part mirrors in the installed vLLM (``vllm/v1/engine/...``; vLLM's own code is called wherever
it can run on a stub, so the simulator follows the release it runs on):

- the engine loop, ``core.py`` ``DPEngineCoreProc.run_busy_loop``: input (requests routed while the
  previous step ran reach their engine now), ``_maybe_publish_request_counts`` before and after the
  step, the step (``schedule()`` or, on a rank without requests, a dummy batch), then
  vLLM's own ``_has_global_unfinished_reqs`` on a one-rank gloo group (step counter; the finish all-reduce
  every 32 steps, from 0.32 at step 1 and every ``dp_sync_interval``, so a drained group keeps stepping
  dummy batches up to the next sync before the wave ends and the counter resets). The balance
  gather's result is handed to every rank right after that sync (the shipped placement). An idle
  group waits for the next arrival (START_DP_WAVE is taken as instantaneous).
- ``throttle``: the flag passed to ``schedule()`` is vLLM's own ``DPEngineCoreProc._should_throttle_prefills``
  called on a stub holding ``prefill_schedule_interval`` and ``step_counter``.
- routing ``score``: vLLM's own ``DPLBAsyncMPClient.get_core_engine_for_request`` called on a stub client
  (0.24: ``waiting * 4 + running``; 0.27 on: the in-flight floor and a KV-pressure term), with the local
  ``+= client_count`` bump between snapshots, and its own ``process_engine_outputs`` on finish; its
  ``lb_engines`` is replaced by the coordinator's publication (``coordinator.py``
  ``DPCoordinatorProc.process_input_socket``: at most every ``stats_update_interval_ms`` when any engine
  published since, else every 5 s), whose entries (``EngineState.request_counts``' shape) are the engines'
  latest publications.
- the freeze and the cap: upstream's own running-cap check, read from the installed ``schedule()``
  (``balance_dev.upstream_cap``).
- one lockstep step lasts the slowest rank's forward plus the shared expert work (``CostModel``), plus,
  with balance on, the gather's own time for the group's size (``collective``: its network rounds x
  ``link_us`` plus its CPU share, as ``make bench-net`` measured them).
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from balance_dev.upstream_cap import upstream_cap
from balance_dev.value_sim.collective import gather_step_ms
from balance_dev.value_sim.config import SimConfig
from balance_dev.value_sim.cost import RankLoad
from balance_dev.value_sim.ranks import build_ranks, deliver_gather, leader_count, single_rank_group, upstream_scheduler
from balance_dev.value_sim.routing import Coordinator, Router, engine_entry, publication
from balance_dev.value_sim.workload import bursty_times, load_trace, mean_output, poisson_times


@dataclass
class _Req:
    rid: str
    arrival: float
    prompt: int
    output: int
    rank: int = -1
    first: float | None = None
    last: float | None = None
    emitted: int = 0
    done: float | None = None


@dataclass
class _Step:
    start: float
    prefill: bool
    frozen: bool
    cap_hit: bool  # after the step, upstream's cap check stops the leader (what the gate reads next step)
    spread: int
    waiting: int
    tokens_out: int


class Simulation:
    def __init__(self, cfg: SimConfig) -> None:
        from vllm.v1.engine.core import DPEngineCoreProc

        from balance_dev import vllm_objects as vo

        self.cfg = cfg
        self.ranks = build_ranks(cfg)
        self.balance = cfg.balance in ("on", "on+throttle")
        self.throttle = cfg.balance in ("throttle", "on+throttle")
        # Every step of a balance mode runs the gather; nothing else adds to the step.
        self.gather_s = gather_step_ms(cfg.gather, cfg.dp, cfg.link_us) / 1000.0 if self.balance else 0.0
        self._should_throttle = DPEngineCoreProc._should_throttle_prefills
        # vLLM's engine core without a model executor, holding the state its sync and throttle read.
        self.engine = vo.bare_dp_engine(DPEngineCoreProc, single_rank_group(), self.ranks[0])
        self.engine.prefill_schedule_interval = cfg.prefill_interval if self.throttle else 1
        self.cap_check = upstream_cap(upstream_scheduler())
        self.published = [engine_entry() for _ in self.ranks]
        self.published_counts: list[tuple[int, int] | None] = [None] * len(self.ranks)
        self.engines_running = False
        self.waves = 0
        self.rng = random.Random(cfg.seed)
        self.router = Router(cfg.routing, cfg.dp, random.Random(cfg.seed + 7))
        self.coordinator = Coordinator(cfg.staleness_ms / 1000.0, cfg.dp)
        self.reqs: dict[str, _Req] = {}
        self.pending: list[_Req] = []  # routed, reaching their engine at its next loop iteration
        self.arrivals: list[tuple[float, int, int, int]] = []  # heap: (time, serial, prompt, output)
        self.serial = 0
        self.steps: list[_Step] = []
        self.t = 0.0
        self.admitted_while_frozen = 0
        self.max_running = 0
        self.admitted = 0
        self._seed_arrivals()

    # -- arrivals ----------------------------------------------------------------------------------
    def _push(self, t: float, prompt: int, output: int) -> None:
        self.serial += 1
        heapq.heappush(self.arrivals, (t, self.serial, prompt, output))

    def _seed_arrivals(self) -> None:
        cfg, rng = self.cfg, self.rng
        if cfg.arrivals == "trace":
            assert cfg.trace is not None
            for t, prompt, output in load_trace(cfg.trace):
                if t < cfg.seconds:
                    self._push(t, min(prompt, cfg.lengths.max_model_len - 1), max(output, 1))
            return
        if cfg.arrivals == "closed":
            for _ in range(self.closed_clients):
                self._push(0.0, *cfg.lengths.draw(rng))
            return
        if not cfg.capacity_req_s:
            raise ValueError("open arrivals need capacity_req_s (see measure_capacity)")
        rate = cfg.load * cfg.capacity_req_s
        if cfg.arrivals == "poisson":
            times = poisson_times(rng, rate, cfg.seconds)
        else:
            times = bursty_times(rng, rate, cfg.seconds, cfg.burst_mean)
        for t in times:
            self._push(t, *cfg.lengths.draw(rng))

    @property
    def closed_clients(self) -> int:
        return max(1, round(self.cfg.load * self.cfg.dp * self.cfg.cap))

    def _route_until(self, t: float) -> None:
        while self.arrivals and self.arrivals[0][0] <= t:
            at, serial, prompt, output = heapq.heappop(self.arrivals)
            rid = f"q{serial}"
            self.coordinator.refresh(at, self.router)
            req = _Req(rid, at, prompt, output, rank=self.router.choose(rid))
            self.reqs[rid] = req
            self.pending.append(req)

    # -- the loop ----------------------------------------------------------------------------------
    def _publish(self, t: float) -> None:
        # An engine publishes only when (running, waiting) changed; a KV usage change alone waits.
        for i, s in enumerate(self.ranks):
            counts = s.get_request_counts()
            if counts != self.published_counts[i]:
                self.published_counts[i] = counts
                self.published[i] = publication(s)
        self.coordinator.engines_published(t, [list(entry) for entry in self.published])

    def _idle(self) -> bool:
        busy = any(s.has_unfinished_requests() for s in self.ranks)
        return not self.engines_running and not self.pending and not busy

    def run(self) -> dict[str, Any]:
        from balance_dev import vllm_objects as vo

        cfg = self.cfg
        while self.t < cfg.seconds:
            if self._idle():
                if not self.arrivals or self.arrivals[0][0] >= cfg.seconds:
                    break
                self.t = self.arrivals[0][0]  # the group sleeps until a request wakes it
                self._route_until(self.t)
                self.engines_running = True  # START_DP_WAVE to the others
            for req in self.pending:
                self.ranks[req.rank].add_request(vo.make_request(req.rid, req.prompt, req.output))
            self.pending = []
            self._publish(self.t)
            end = self._step()
            self._publish(end)
            self._route_until(end)
            self.t = end
        return self.metrics()

    def _step(self) -> float:
        from balance_dev import vllm_objects as vo

        frozen = self.balance and self.cap_check.stops(self.ranks[0], leader_count(self.ranks[0]))
        throttle = bool(self._should_throttle(self.engine))
        loads: list[RankLoad] = []
        emitted: list[_Req] = []
        for s in self.ranks:
            if not s.has_requests():
                loads.append(RankLoad())  # execute_dummy_batch: the forward still runs
                continue
            before = {r.request_id for r in s.running}
            out = s.schedule(throttle)
            admitted = sum(1 for r in s.running if r.request_id not in before)
            self.admitted += admitted
            if frozen and admitted:
                self.admitted_while_frozen += admitted
            tokens = prefill = context = 0
            for rid, n in out.num_scheduled_tokens.items():
                request = s.requests[rid]
                computed = request.num_computed_tokens  # schedule() already advanced it
                tokens += n
                context += computed
                if computed - n < request.num_prompt_tokens:
                    prefill += n
            loads.append(RankLoad(tokens, prefill, context))
            model_output = vo.fake_model_output(out, s)
            s.update_from_output(out, model_output)
            for rid, sampled in zip(model_output.req_ids, model_output.sampled_token_ids, strict=True):
                if sampled:
                    emitted.append(self.reqs[rid])
        end = self.t + self.cfg.cost.step_s(loads) + self.gather_s
        for req in emitted:
            req.emitted += 1
            req.last = end
            if req.first is None:
                req.first = end
            if req.emitted >= req.output:
                self._finish(req, end)
        if self.balance:
            deliver_gather(self.ranks)
        # vLLM's own _has_global_unfinished_reqs (its all-reduce over a one-rank group: the OR over
        # ranks is taken here), then the wave bookkeeping of run_busy_loop.
        unfinished = any(s.has_unfinished_requests() for s in self.ranks)
        self.engines_running = bool(self.engine._has_global_unfinished_reqs(unfinished))
        if not self.engines_running:
            self.waves += 1
            self.engine.step_counter = 0
        running = [len(s.running) for s in self.ranks]
        self.max_running = max(self.max_running, *running)
        self.steps.append(
            _Step(
                start=self.t,
                prefill=any(load.prefill_tokens for load in loads),
                frozen=frozen,
                cap_hit=self.cap_check.stops(self.ranks[0], max(running)),
                spread=max(running) - min(running),
                waiting=sum(s.get_request_counts()[1] for s in self.ranks) + len(self.pending),
                tokens_out=len(emitted),
            )
        )
        return end

    def _finish(self, req: _Req, t: float) -> None:
        if req.rid in self.ranks[req.rank].requests:
            raise RuntimeError(f"{req.rid}: emitted {req.emitted} tokens but the scheduler still holds it")
        req.done = t
        self.router.finished(req.rid)
        if self.cfg.arrivals == "closed":
            self._push(t + self.cfg.think_s, *self.cfg.lengths.draw(self.rng))

    # -- metrics -----------------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        cfg = self.cfg
        horizon = cfg.seconds
        warm = cfg.warmup_frac * horizon
        measured = [r for r in self.reqs.values() if r.arrival >= warm]
        # A request still without its first token at the horizon counts with a TTFT of at least
        # horizon - arrival (censored): under overload the percentiles are lower bounds.
        ttft = [(r.first if r.first is not None else horizon) - r.arrival for r in measured]
        tpot = [
            (r.last - r.first) / (r.emitted - 1)
            for r in measured
            if r.first is not None and r.last is not None and r.emitted > 1
        ]
        e2e = [r.done - r.arrival for r in measured if r.done is not None]
        steps = [s for s in self.steps if s.start >= warm]
        tokens_after_warm = sum(s.tokens_out for s in steps if s.start < horizon)
        span = max(horizon - warm, 1e-9)
        finished = [r for r in self.reqs.values() if r.done is not None]
        in_system = sum(len(s.requests) for s in self.ranks) + len(self.pending)
        quarter = [s.waiting for s in self.steps if s.start >= horizon / 4 and s.start < horizon / 2]
        last = [s.waiting for s in self.steps if s.start >= 3 * horizon / 4]
        q2 = statistics.fmean(quarter) if quarter else 0.0
        q4 = statistics.fmean(last) if last else 0.0
        return {
            **{k: v for k, v in asdict(cfg).items() if k not in ("cost", "lengths")},
            "cost": asdict(cfg.cost),
            "lengths": asdict(cfg.lengths),
            "throughput_tok_s": tokens_after_warm / span,
            "requests_per_s": sum(1 for r in finished if r.done is not None and r.done >= warm) / span,
            "ttft_p50_s": _pct(ttft, 50),
            "ttft_p99_s": _pct(ttft, 99),
            "tpot_p50_ms": 1000 * _pct(tpot, 50),
            "tpot_p99_ms": 1000 * _pct(tpot, 99),
            "e2e_p50_s": _pct(e2e, 50),
            "e2e_p99_s": _pct(e2e, 99),
            "frozen_fraction": _frac(s.frozen for s in steps),
            "prefill_step_fraction": _frac(s.prefill for s in steps),
            "cap_hit_fraction": _frac(s.cap_hit for s in steps),
            "spread_mean": statistics.fmean(s.spread for s in steps) if steps else 0.0,
            "waiting_q2_mean": q2,
            "waiting_q4_mean": q4,
            "queues_stable": q4 <= 1.5 * q2 + cfg.dp,
            "steps": len(self.steps),
            "step_ms_mean": 1000 * span / len(steps) if steps else 0.0,
            "gather_ms_per_step": 1000 * self.gather_s,
            "waves": self.waves,
            "arrived": len(self.reqs),
            "finished": len(finished),
            "in_system": in_system,
            "unserved_at_horizon": sum(1 for r in measured if r.first is None),
            "admitted": self.admitted,
            "admitted_while_frozen": self.admitted_while_frozen,
            "max_running": self.max_running,
            "closed_clients": self.closed_clients if cfg.arrivals == "closed" else None,
        }


def _pct(values: Sequence[float], pct: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(pct / 100 * len(ordered)) - 1))]


def _frac(flags: Iterable[bool]) -> float:
    items = list(flags)
    return sum(items) / len(items) if items else 0.0


def simulate(cfg: SimConfig) -> dict[str, Any]:
    return Simulation(cfg).run()


def measure_capacity(cfg: SimConfig) -> dict[str, Any]:
    """Saturated capacity with balance off: a closed loop keeping 2x the group's slots busy.

    ``capacity_req_s`` is its output tokens/s over the mean output length: counting completions in a
    short window would favour short requests (the long ones started in it are still running).
    """
    probe = replace(cfg, arrivals="closed", load=2.0, balance="off", capacity_req_s=None, trace=None)
    result = simulate(probe)
    result["capacity_req_s"] = result["throughput_tok_s"] / mean_output(cfg.lengths)
    return result

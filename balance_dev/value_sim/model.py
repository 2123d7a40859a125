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
import json
import math
import random
import statistics
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from balance_dev.gloo import one_rank_group
from balance_dev.upstream_cap import upstream_cap
from balance_dev.value_sim.collective import DEFAULT_LINK_US, gather_step_ms

BALANCE_MODES = ("off", "on", "throttle", "on+throttle")
ARRIVALS = ("closed", "poisson", "bursty", "trace")
ROUTINGS = ("score", "rr", "random")
HEARTBEAT_S = 5.0  # coordinator.py: unchanged stats are re-published every 5000 ms


# --------------------------------------------------------------------------------------------------
# Step time


@dataclass(frozen=True)
class RankLoad:
    """What one rank carries in one forward: scheduled tokens, of which prompt tokens, and KV read."""

    tokens: int = 0
    prefill_tokens: int = 0
    context: int = 0  # sum over scheduled requests of their context length after this step


@dataclass(frozen=True)
class CostModel:
    """Lockstep MoE step time. Defaults: see docs/value.md.

    Cited: DeepSeek's published V3/R1 serving statistics (open-infra-index, "Day 6: Inference System
    Overview", H800, EP across nodes): 73.7k prefill tokens/s per 8-GPU node, i.e. about 0.11 ms per
    prompt token per GPU (``token_ms + expert_token_ms``), and 20-22 output tokens/s per user, i.e. a
    decode step of about 45-50 ms (``base_ms`` + a full batch's token and attention terms).
    Assumed: the split of the 0.11 ms between the rank's own layers (attention, dense: ``token_ms``)
    and the experts spread over the group (``expert_token_ms``), the attention cost per context token
    (``context_us``), and the extra cost of a step that carries prefill (``prefill_ms``: decode-only
    steps replay a captured graph, mixed steps do not).
    """

    base_ms: float = 35.0  # per step, every rank (weights read, all-to-all latency, launch)
    token_ms: float = 0.05  # per token scheduled on this rank
    context_us: float = 0.5  # per context token this rank's attention reads
    prefill_ms: float = 5.0  # once per rank that carries any prompt tokens
    expert_token_ms: float = 0.06  # per token of the whole group, divided by DP (experts spread over EP)

    def rank_ms(self, load: RankLoad) -> float:
        return (
            self.base_ms
            + self.token_ms * load.tokens
            + self.context_us * 1e-3 * load.context
            + (self.prefill_ms if load.prefill_tokens else 0.0)
        )

    def step_s(self, loads: Sequence[RankLoad]) -> float:
        """All ranks wait for the slowest (MoE all-to-all every layer); experts see everyone's tokens."""
        total = sum(load.tokens for load in loads)
        return (max(self.rank_ms(load) for load in loads) + self.expert_token_ms * total / len(loads)) / 1000.0

    @classmethod
    def flat(cls, ms: float = 40.0) -> CostModel:
        """Every step costs the same, whatever it carries (the model in which balance cannot pay)."""
        return cls(base_ms=ms, token_ms=0.0, context_us=0.0, prefill_ms=0.0, expert_token_ms=0.0)


# --------------------------------------------------------------------------------------------------
# Workload


@dataclass(frozen=True)
class Lengths:
    """Lognormal prompt and output lengths (medians and log-space sigmas), clipped to the model length."""

    prompt_median: float = 400.0
    prompt_sigma: float = 0.8
    output_median: float = 100.0
    output_sigma: float = 0.8
    max_model_len: int = 2048  # balance_dev.vllm_objects.make_vllm_config

    def draw(self, rng: random.Random) -> tuple[int, int]:
        prompt = int(rng.lognormvariate(math.log(self.prompt_median), self.prompt_sigma))
        prompt = min(max(prompt, 1), self.max_model_len * 3 // 4)
        output = int(rng.lognormvariate(math.log(self.output_median), self.output_sigma))
        return prompt, min(max(output, 1), self.max_model_len - prompt)


Arrival = tuple[float, int, int]  # (time s, prompt tokens, output tokens)


def poisson_times(rng: random.Random, rate: float, seconds: float) -> list[float]:
    times, t = [], 0.0
    while rate > 0:
        t += rng.expovariate(rate)
        if t >= seconds:
            break
        times.append(t)
    return times


def bursty_times(rng: random.Random, rate: float, seconds: float, burst_mean: float) -> list[float]:
    """Compound Poisson: bursts at ``rate / burst_mean``, each a geometric number (mean ``burst_mean``)
    of requests arriving together; the mean rate is ``rate``."""
    p = 1.0 / burst_mean
    times = []
    for t in poisson_times(rng, rate / burst_mean, seconds):
        size = 1 if p >= 1.0 else 1 + int(math.log(1.0 - rng.random()) / math.log(1.0 - p))
        times.extend([t] * size)
    return times


def load_trace(path: str | Path) -> list[Arrival]:
    """JSONL, one request a line: ``{"arrival_s": 0.5, "prompt_len": 300, "output_len": 80}``."""
    rows = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows.append((float(row["arrival_s"]), int(row["prompt_len"]), int(row["output_len"])))
    return sorted(rows)


# --------------------------------------------------------------------------------------------------
# Routing


def engine_entry(waiting: int = 0, running: int = 0, kv_cache_usage: float = 0.0) -> list[int | float]:
    """One engine's counts as the coordinator keeps them and the client scores them.

    ``coordinator.py`` ``EngineState.request_counts`` of the installed vLLM gives the shape: ``[waiting,
    running]`` up to 0.24, ``[waiting, running, kv_cache_usage]`` from 0.27 (filled from the engine's
    ``SchedulerStats`` in that order). A shape this does not know fails here, not as a wrong score.
    """
    return [waiting, running, kv_cache_usage][: _entry_fields()]


@cache
def _entry_fields() -> int:
    from vllm.v1.engine.coordinator import EngineState

    fields = len(EngineState().request_counts)
    if fields not in (2, 3):
        raise RuntimeError(f"vLLM's EngineState.request_counts has {fields} fields; the simulator knows 2 or 3")
    return fields


def publication(scheduler: Any) -> list[int | float]:
    """What an engine publishes (core.py ``_maybe_publish_request_counts``), as the coordinator stores it."""
    running, waiting = scheduler.get_request_counts()  # scheduler.py: (running, waiting + held back)
    usage = scheduler.get_kv_cache_usage() if hasattr(scheduler, "get_kv_cache_usage") else 0.0
    return engine_entry(waiting, running, usage)


class Router:
    """Which engine a new request goes to. ``score`` is vLLM's own client code on a stub."""

    def __init__(self, mode: str, dp: int, rng: random.Random) -> None:
        if mode not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}")
        self.mode, self.dp, self.rng, self.next_rr = mode, dp, rng, 0
        # The attributes get_core_engine_for_request and process_engine_outputs read, as
        # core_client.py DPLBAsyncMPClient.__init__ sets them for one front-end (eng_start_index =
        # len(core_engines) * client_index // client_count = 0); engine_inflight is read from 0.27 on,
        # streaming_reqs from 0.33 on.
        self.client = SimpleNamespace(
            lb_engines=[engine_entry() for _ in range(dp)],
            client_count=1,
            eng_start_index=0,
            core_engines=list(range(dp)),
            reqs_in_flight={},
            engine_inflight=Counter(),
            streaming_reqs=set(),
        )

    def choose(self, request_id: str) -> int:
        if self.mode == "rr":
            self.next_rr = (self.next_rr + 1) % self.dp
            return (self.next_rr - 1) % self.dp
        if self.mode == "random":
            return self.rng.randrange(self.dp)
        from vllm.v1.engine.core_client import DPLBAsyncMPClient

        # resumable: 0.33's get_core_engine_for_request reads it (a resumable request keeps its engine).
        request = SimpleNamespace(request_id=request_id, data_parallel_rank=None, pooling_params=None, resumable=False)
        return int(DPLBAsyncMPClient.get_core_engine_for_request(self.client, request))  # type: ignore[arg-type]

    def snapshot(self, counts: Sequence[Sequence[int | float]]) -> None:
        """A coordinator publication: replaces the counts, and with them the local bumps."""
        self.client.lb_engines = [list(c) for c in counts]

    def finished(self, request_id: str) -> None:
        """vLLM's own ``DPLBAsyncMPClient.process_engine_outputs`` for an output finishing the request."""
        if self.mode != "score":
            return  # rr and random keep no per-request state
        from vllm.v1.engine.core_client import DPLBAsyncMPClient

        outputs = SimpleNamespace(finished_requests=[request_id])
        step = DPLBAsyncMPClient.process_engine_outputs(self.client, outputs)  # type: ignore[arg-type]
        try:  # a coroutine that awaits nothing: run it to its end without an event loop
            step.send(None)
        except StopIteration:
            return
        step.close()
        raise RuntimeError("vLLM's process_engine_outputs awaited something; the simulator cannot drive it")


class Coordinator:
    """The coordinator's publications as the client sees them, evaluated lazily at routing time.

    Engines publish their counts (``publication``) whenever they change (before and after each step);
    the coordinator publishes the latest counts at instants ``k * interval`` if any engine published
    since its last publication, else every 5 s. ``interval <= 0``: the client always sees the latest.
    """

    def __init__(self, interval_s: float, dp: int) -> None:
        self.interval_s = interval_s
        self.changes: deque[tuple[float, list[list[int | float]]]] = deque([(0.0, [engine_entry() for _ in range(dp)])])
        self.last_publication = 0.0

    def engines_published(self, t: float, counts: list[list[int | float]]) -> None:
        if counts != self.changes[-1][1]:
            self.changes.append((t, counts))

    def refresh(self, t: float, router: Router) -> None:
        if self.interval_s <= 0:
            router.snapshot(self.changes[-1][1])
            return
        instant = math.floor(t / self.interval_s) * self.interval_s
        if instant <= self.last_publication:
            return
        while len(self.changes) > 1 and self.changes[1][0] <= instant:
            self.changes.popleft()  # keep the latest change at or before the instant, and later ones
        changed_at, counts = self.changes[0]
        if changed_at > self.last_publication or instant - self.last_publication >= HEARTBEAT_S:
            router.snapshot(counts)
            self.last_publication = instant


# --------------------------------------------------------------------------------------------------
# What the gate reads (the one place that knows the runtime's interface)


def deliver_gather(ranks: Sequence[Any]) -> None:
    """Hand every rank what the per-step gather would deliver: the leader's end-of-step count.

    ``balance_gather()`` takes the maximum of ``balance_running_count()`` (upstream's running-cap count)
    over the group (``group_max``) as ``balance_leader_running``, which the gate compares with the cap
    in the next ``schedule()``.
    """
    leader = max(r.balance_running_count() for r in ranks)
    for s in ranks:
        s.balance_leader_running = leader


def leader_count(scheduler: Any) -> int:
    return int(scheduler.balance_leader_running)


def upstream_scheduler() -> type:
    """The installed vLLM's own Scheduler (the patch rebinds the module's name to BalanceScheduler)."""
    import vllm.v1.core.sched.scheduler as sched_mod

    import vllm_ascend.patch.platform.patch_balance_schedule  # noqa: F401  (keeps the original)

    return sched_mod._balance_original_scheduler  # type: ignore[attr-defined]


def single_rank_group() -> Any:
    """A real one-rank gloo group for vLLM's finish sync: the simulator holds every rank in one process."""
    return one_rank_group()


# --------------------------------------------------------------------------------------------------
# The simulation


@dataclass(frozen=True)
class SimConfig:
    dp: int = 8
    arrivals: str = "poisson"
    load: float = 1.0  # open: x capacity_req_s; closed: x (dp * cap) requests in the system
    routing: str = "score"
    staleness_ms: float = 100.0  # vLLM's default min_stats_update_interval_ms
    balance: str = "off"
    gather: str = "group_max_tcp"  # how the balance modes find the leader's count (collective.GATHERS)
    link_us: float = DEFAULT_LINK_US  # one-way network latency between DP ranks, paid per round of the gather
    seconds: float = 60.0
    seed: int = 1
    cap: int = 16  # max_num_seqs per rank
    token_budget: int = 2048  # max_num_batched_tokens per rank
    prefill_interval: int = 4  # prefill_schedule_interval for the throttle modes
    burst_mean: float = 8.0
    think_s: float = 0.0  # closed loop: delay before a finished client sends its next request
    warmup_frac: float = 0.2
    capacity_req_s: float | None = None  # balance-off saturated capacity, requests/s (open arrivals)
    trace: str | None = None
    cost: CostModel = field(default_factory=CostModel)
    lengths: Lengths = field(default_factory=Lengths)

    def __post_init__(self) -> None:
        if self.balance not in BALANCE_MODES:
            raise ValueError(f"balance must be one of {BALANCE_MODES}")
        if self.arrivals not in ARRIVALS:
            raise ValueError(f"arrivals must be one of {ARRIVALS}")
        if self.arrivals == "trace" and not self.trace:
            raise ValueError("arrivals=trace needs a trace file")
        gather_step_ms(self.gather, self.dp, self.link_us)  # refuses an unknown gather or a negative link


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


def build_ranks(cfg: SimConfig) -> list[Any]:
    """One scheduler per DP rank, built as the runtime tests build them (one shared config)."""
    import vllm_ascend.patch.platform.patch_balance_schedule as patch
    from balance_dev import vllm_objects as vo

    enabled = cfg.balance in ("on", "on+throttle")
    cls = patch.BalanceScheduler if enabled else upstream_scheduler()
    config = vo.make_vllm_config(
        max_num_seqs=cfg.cap,
        max_num_batched_tokens=cfg.token_budget,
        data_parallel_size=cfg.dp,
        additional_config=vo.balance_config(True) if enabled else None,
    )
    # Room for every running request at the full model length: KV never preempts here.
    blocks = cfg.cap * -(-cfg.lengths.max_model_len // vo.BLOCK_SIZE) + 16
    ranks = [vo.make_scheduler(cls, config, num_blocks=blocks) for _ in range(cfg.dp)]
    if enabled and not all(s._balance_enabled for s in ranks):
        raise RuntimeError("balance did not enable on the BalanceScheduler (a global AscendConfig says off?)")
    return ranks


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


def mean_output(lengths: Lengths, draws: int = 100_000) -> float:
    """The mean output length of the distribution (fixed-seed Monte Carlo: clipping has no closed form)."""
    rng = random.Random(0)
    return statistics.fmean(lengths.draw(rng)[1] for _ in range(draws))


def measure_capacity(cfg: SimConfig) -> dict[str, Any]:
    """Saturated capacity with balance off: a closed loop keeping 2x the group's slots busy.

    ``capacity_req_s`` is its output tokens/s over the mean output length: counting completions in a
    short window would favour short requests (the long ones started in it are still running).
    """
    probe = replace(cfg, arrivals="closed", load=2.0, balance="off", capacity_req_s=None, trace=None)
    result = simulate(probe)
    result["capacity_req_s"] = result["throughput_tok_s"] / mean_output(cfg.lengths)
    return result

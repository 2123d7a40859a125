"""Pause and sleep through vLLM's dev endpoints: ``/pause?mode=abort|keep|wait`` then ``/resume`` during the
freeze and under the 64-request load, ``/sleep?level=1`` then ``/wake_up`` during the freeze; nothing is
generated while paused, and each request ends as upstream's semantics say."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import client
from client import CAP, Stream
from deployment import Deployment

from fault_scenarios.freeze import freeze_check, freeze_streams
from fault_scenarios.outcomes import Ledger, Result, Step, expect_all, outcome, run_scenario, tally, tokens_between
from fault_scenarios.plan import HTTP_TIMEOUT_S, LENGTHS, PAUSE_GRACE_S, PAUSE_HOLD_S, Run, specs64
from fault_scenarios.watch import frozen, held, probe_now, wait_probe

SLEEP_IGNORED = "sleep mode is not supported on CPU, ignore it"


def pause_freeze(mode: str, keep_cache: bool = False) -> Step:
    """``keep_cache``: ``clear_cache=false``. vLLM's default (true) resets the prefix cache once paused,
    which preempts every running request (``reset_prefix_cache(reset_running_requests=True)``), in
    mode keep too: after resume every rank re-admits from 0 running, and the gate is open for that
    step. With the cache kept, the long requests are still running after resume: the freeze holds."""
    tag = f"pf{mode}{'kc' if keep_cache else ''}"
    name = f"pause {mode}{', clear_cache=false,' if keep_cache else ''} during freeze"

    def step(ledger: Ledger, r: Run, d: Deployment) -> Result:
        before = frozen(d.probe())
        short_tokens = LENGTHS[r.topology].pause_short
        t = time.monotonic()
        longs, shorts, acted = run_scenario(
            freeze_streams(ledger, d, tag, short_tokens, lambda: pause_resume(d, mode, keep_cache))
        )
        took = time.monotonic() - t
        streams = longs + shorts
        problems = list(acted["problems"])
        want = "aborted" if mode == "abort" else "exact"
        problems += expect_all(streams, want)
        problems += pause_window(streams, acted, mode)
        text = f"pause {acted['pause_s']:.1f} s"
        if mode == "keep":
            ftext, fproblems = freeze_check(r, longs, shorts, before, frozen(d.probe()), control=False)
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
def pause_load(mode: str) -> Step:
    def step(ledger: Ledger, r: Run, d: Deployment) -> Result:
        if mode == "abort":
            # Long enough that none finishes before all 64 are in the engines: all are aborted.
            specs = [(f"e2e-pl{mode}-load-{i}", p, 48 + i % 16, rank) for i, (_, p, _, rank) in enumerate(specs64())]

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
        streams, acted = run_scenario(load_streams(d, specs, trigger, what, lambda: pause_resume(d, mode)))
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


def sleep_freeze(ledger: Ledger, r: Run, d: Deployment) -> Result:
    t = time.monotonic()
    longs, shorts, acted = run_scenario(
        freeze_streams(ledger, d, "sl", LENGTHS[r.topology].pause_short, lambda: sleep_wake(d))
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

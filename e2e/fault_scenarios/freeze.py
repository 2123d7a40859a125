"""The freeze: 4 long requests hold rank 1 at its cap, 4 short ones reach rank 0, and with balance on none of
them streams before the first long one finished; with an action (a pause, a sleep) sent in the middle."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import checks
import client
from client import CAP, Stream
from deployment import Deployment

from fault_scenarios.outcomes import Ledger, Result, expect_all, outcome, run_scenario, tally
from fault_scenarios.plan import LENGTHS, Run
from fault_scenarios.watch import frozen, held, held_now, wait_probe


async def freeze_streams(
    ledger: Ledger, d: Deployment, tag: str, short_tokens: int, action: Callable[[], dict[str, Any]] | None
) -> tuple[list[Stream], list[Stream], dict[str, Any]]:
    """4 long requests on rank 1 (at its cap once each streamed a token), then 4 short ones on rank 0;
    ``action`` (blocking: run in a thread) once rank 0 holds the 4 short ones."""
    route = d.topo.route
    long_tokens = LENGTHS[d.topo.name].long
    ledger.serial += 1
    tag = f"{tag}{ledger.serial}"  # each attempt its own request ids (the probe lists every admission)
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
        waiting: list[asyncio.Future[Any]] = [first_tokens, *longs]
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
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
    r: Run, longs: list[Stream], shorts: list[Stream], before: dict, after: dict, control: bool
) -> tuple[str, list[str]]:
    """(summary, problems). Balance on: no short request streamed a token before the first long one
    finished (make e2e's criterion) and rank 0 counted frozen steps. Balance off, ``control``: the
    balance-on criterion fails for all 4 (it has teeth); off, no frozen step ever."""
    first_long = min(longs, key=lambda s: s.last_token())
    gate_open = first_long.token_times[-1 - checks.FREEZE_SLACK_TOKENS]
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


def freeze_plain(ledger: Ledger, r: Run, d: Deployment) -> Result:
    n = sum(1 for res in ledger.results if res.run == r.key and res.scenario.startswith("freeze"))
    name = "freeze" if n == 0 else "freeze after resume"
    before = frozen(d.probe())
    t = time.monotonic()
    longs, shorts, _ = run_scenario(freeze_streams(ledger, d, f"fz{n}", client.SHORT_TOKENS, None))
    took = time.monotonic() - t
    after = frozen(d.probe())
    text, problems = freeze_check(r, longs, shorts, before, after, control=True)
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

"""Streams the client cuts: 32 of 64 closed mid-stream (balance on: while the gate is closed), the engines left
holding nothing; then a second load, every request exact."""

from __future__ import annotations

import asyncio
import time

import client
from client import Stream
from deployment import Deployment

from fault_scenarios.outcomes import Ledger, Result, expect_all, outcome, run_scenario, tally
from fault_scenarios.plan import SCENARIO_TIMEOUT_S, Run, specs64
from fault_scenarios.watch import gate_closed_now, held, in_closed_gate, wait_probe


def cut_streams(ledger: Ledger, r: Run, d: Deployment) -> Result:
    specs: list[tuple[str, int, int, int | None, int | None]] = []
    # The first 32 sent are cut, after 2..6 tokens (long enough to be mid-stream then): 32 more wait
    # behind them, so the leader sits at its cap while they stream. The last 32 must complete.
    for i, (_, n_prompt, max_tokens, rank) in enumerate(specs64()):
        if i < 32:
            specs.append((f"e2e-cut-cut-{i}", n_prompt, 40 + i % 16, rank, 2 + i % 5))
        else:
            specs.append((f"e2e-cut-load-{i}", n_prompt, max_tokens, rank, None))
    t = time.monotonic()
    streams, drained = run_scenario(cut_load(d, specs, r.balance))
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


def load_after(ledger: Ledger, r: Run, d: Deployment) -> Result:
    t = time.monotonic()
    streams = run_scenario(client.load(d.topo.route, SCENARIO_TIMEOUT_S))
    took = time.monotonic() - t
    tokens = sum(len(s.token_ids) for s in streams)
    res = Result(r.key, "second load", f"{tally(streams)}, {tokens} tokens", took, expect_all(streams, "exact"))
    res.outcomes = {s.id: outcome(s) for s in streams}
    res.streams = streams
    return res


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

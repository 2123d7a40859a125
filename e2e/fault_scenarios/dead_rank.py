"""A dead rank under load: SIGKILL of rank 1's engine core (internal LB) or of node 1's whole tree (headless);
every request in flight answered with an error and every process gone within ``DEAD_BOUND_S``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable

import client
from client import CAP, Stream
from deployment import Deployment

from fault_scenarios.outcomes import Ledger, Result, Stop, outcome
from fault_scenarios.plan import Run, specs64
from fault_scenarios.watch import leftovers, wait_probe

DEAD_BOUND_S = 120.0  # a dead rank: every request answered and every process gone within this, or a hang


def dead_rank(ledger: Ledger, r: Run, d: Deployment) -> Result:
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
    on = next((x for x in ledger.results if x.run == r.control_of and x.scenario == "dead rank under load"), None)
    if on is not None and on.extra.get("gone_s") is not None and not left:
        on_s = on.extra["gone_s"]
        text += f"; balance on: gone in {on_s:.1f} s, off (this control) {gone_s:.1f} s"
        if on_s > gone_s + max(10.0, 0.5 * gone_s):
            problems.append(f"balance on took {on_s:.1f} s to exit, the balance-off control {gone_s:.1f} s")
    res = Result(r.key, "dead rank under load", text, took, problems, streams=streams)
    res.extra = {"gone_s": None if left else gone_s, "last_error_s": last_error}
    return res


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

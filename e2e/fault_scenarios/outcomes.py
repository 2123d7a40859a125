"""What became of each request, one scenario's record, and the ledger of a whole ``make e2e-faults`` run.

``outcome`` is the verdict per request (exact, aborted, cut, error); a scenario is a ``Step``: the ledger,
the run and its deployment in, a ``Result`` out; ``run_scenario`` runs its client under a hard timeout and
turns a hang or a client failure into ``Stop``, which ends the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import client
from client import Stream
from deployment import Deployment

from fault_scenarios.plan import SCENARIO_TIMEOUT_S, Run


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


@dataclass
class Ledger:
    """What the scenarios of every run so far left: their results (a control reads its balance-on run's),
    and the serial that gives each freeze attempt its own request ids (the probe lists every admission)."""

    results: list[Result] = field(default_factory=list)
    serial: int = 0


Step = Callable[[Ledger, Run, Deployment], Result]


def run_scenario(coro: Coroutine[Any, Any, Any], timeout: float = SCENARIO_TIMEOUT_S) -> Any:
    try:
        return asyncio.run(asyncio.wait_for(coro, timeout))
    except (TimeoutError, asyncio.TimeoutError):
        raise Stop(f"no result after {timeout:.0f} s (hang?)") from None
    except client.ClientFailure as e:
        raise Stop(str(e)) from None
    except aiohttp.ClientError as e:
        raise Stop(f"HTTP client error: {type(e).__name__}: {e}") from None

"""The e2e's HTTP client: streaming ``/v1/completions`` against ``vllm serve``, two scenarios.

Prompts are token ids (the server runs with ``--skip-tokenizer-init``); ``return_token_ids`` makes
every streamed chunk carry the ids of its new tokens, so the client counts tokens exactly and
stamps each one with its arrival time (``time.monotonic()``). Each request is named with the
``X-Request-Id`` header (vLLM builds its request id from it, so the probe's per-rank admissions
can be matched to the client's requests) and pinned to a DP rank by ``Route``: the
``X-data-parallel-rank`` header on a server that routes over all ranks, or the port of that
rank's own server behind an external load balancer.

- ``freeze``: 4 long requests pinned to DP rank 1 (``max_num_seqs`` = 4: rank 1 sits at its cap);
  once each has streamed its first token, 4 short requests pinned to rank 0.
- ``load``: 64 requests of mixed prompt and output lengths, some pinned, most left to the server's
  (or the client's round-robin, for external LB) balancing; each must stream exactly ``max_tokens``.

The client asserts only what HTTP shows (token counts, finish reasons, status); what the times
mean for balance on and off is decided in ``run.py``, with the probe's view of the engine cores.
"""

from __future__ import annotations

import asyncio
import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

CAP = 4  # --max-num-seqs: the per-rank running cap the freeze scenario fills on rank 1
LONG_TOKENS = 48
SHORT_TOKENS = 4
LOAD_REQUESTS = 64
MODEL_NAME = "tiny"
PROMPT_VOCAB = 500  # ids 3..502: inside the model's 512, clear of bos/eos


class ClientFailure(Exception):
    pass


@dataclass(frozen=True)
class Route:
    """Where a request for each DP rank goes: one URL plus the rank header, or one URL per rank."""

    urls: tuple[str, ...]
    rank_header: bool

    def target(self, rank: int | None, n: int) -> tuple[str, dict[str, str]]:
        if self.rank_header:
            return self.urls[0], ({} if rank is None else {"X-data-parallel-rank": str(rank)})
        # External LB: the rank is the server; unpinned requests are spread round-robin, as a
        # load balancer in front of the servers would.
        return self.urls[n % len(self.urls) if rank is None else rank], {}


@dataclass
class Stream:
    id: str
    rank: int | None
    max_tokens: int
    sent: float
    token_ids: list[int] = field(default_factory=list)
    token_times: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    usage_tokens: int | None = None
    done: bool = False
    error: str | None = None  # open_stream: what went wrong, as the client saw it
    cut: bool = False  # open_stream: the client closed the stream (cut_after)
    cut_at: float | None = None  # time.time() of the cut: the probe's clock
    cut_missed: bool = False  # open_stream: cut_after was reached, but the request finished before a cut
    ended: float | None = None  # time.monotonic() when the stream ended, however

    def exact(self) -> bool:
        """Completed as asked: every token, finish reason ``length``, the same count in ``usage``."""
        n = self.max_tokens
        return self.done and len(self.token_ids) == n and self.usage_tokens == n and self.finish_reason == "length"

    def first_token(self) -> float:
        return self.token_times[0]

    def last_token(self) -> float:
        return self.token_times[-1]


def prompt(n: int, salt: int) -> list[int]:
    return [3 + (salt * 7 + i) % PROMPT_VOCAB for i in range(n)]


async def stream_completion(
    session: aiohttp.ClientSession,
    route: Route,
    rid: str,
    n_prompt: int,
    max_tokens: int,
    rank: int | None,
    n: int = 0,
    first_token: asyncio.Event | None = None,
) -> Stream:
    """One streamed request that must complete: exactly ``max_tokens`` token ids, ``length``, ``[DONE]``."""
    s = await open_stream(session, route, rid, n_prompt, max_tokens, rank, n, first_token=first_token)
    if s.error is not None:
        raise ClientFailure(f"{rid}: {s.error}")
    if not s.done:
        raise ClientFailure(f"{rid}: stream ended without [DONE]")
    if not s.exact():
        raise ClientFailure(
            f"{rid}: streamed {len(s.token_ids)} tokens, usage says {s.usage_tokens}, finish reason "
            f"{s.finish_reason!r}; expected exactly {max_tokens} and 'length'"
        )
    return s


async def open_stream(
    session: aiohttp.ClientSession,
    route: Route,
    rid: str,
    n_prompt: int,
    max_tokens: int,
    rank: int | None,
    n: int = 0,
    first_token: asyncio.Event | None = None,
    cut_after: int | None = None,
    cut_ok: Callable[[], bool] | None = None,
) -> Stream:
    """One streamed request, whatever becomes of it: the ``Stream`` says (never raises for the server's
    answer). ``cut_after``: the client closes the connection once that many tokens arrived (``cut``,
    ``cut_at`` in ``time.time()``, the probe's clock). An HTTP error, an error chunk, a broken
    connection or a stream without ``[DONE]`` is ``error``. ``cut_ok``: the cut waits for the first token
    at which it says yes (the fault runs: while the probe shows balance's gate closed)."""
    url, headers = route.target(rank, n)
    body = {
        "model": MODEL_NAME,
        "prompt": prompt(n_prompt, zlib.crc32(rid.encode()) % 97),
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_token_ids": True,
    }
    s = Stream(rid, rank, max_tokens, time.monotonic())
    try:
        async with session.post(f"{url}/v1/completions", json=body, headers={**headers, "X-Request-Id": rid}) as resp:
            if resp.status != 200:
                s.error = f"HTTP {resp.status} from {url}: {(await resp.text())[:300]}"
                s.ended = time.monotonic()
                return s
            async for raw in resp.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[len(b"data:") :].strip()
                if data == b"[DONE]":
                    s.done = True
                    break
                now = time.monotonic()
                chunk = json.loads(data)
                if "error" in chunk:
                    s.error = f"error in stream: {chunk['error']}"
                    break
                for choice in chunk.get("choices", []):
                    ids = choice.get("token_ids") or []
                    s.token_ids.extend(ids)
                    s.token_times.extend([now] * len(ids))
                    if ids and first_token is not None:
                        first_token.set()
                    if choice.get("finish_reason"):
                        s.finish_reason = choice["finish_reason"]
                if chunk.get("usage"):
                    s.usage_tokens = chunk["usage"]["completion_tokens"]
                if (
                    cut_after is not None
                    and len(s.token_ids) >= cut_after
                    and not s.finish_reason
                    and (cut_ok is None or cut_ok())
                ):
                    s.cut = True
                    s.cut_at = time.time()
                    resp.close()  # the connection goes: vLLM aborts the request
                    break
                if cut_after is not None and len(s.token_ids) >= cut_after and s.finish_reason:
                    # Finished with cut_after reached and no cut made (the cut's chunk carried the finish
                    # reason, or cut_ok held the cut back): nothing was left to cut.
                    s.cut_missed = True
    except (aiohttp.ClientError, ConnectionError) as e:
        s.error = f"{type(e).__name__}: {e}"
    s.ended = time.monotonic()
    if s.error is None and not s.done and not s.cut:
        s.error = "stream ended without [DONE]"
    return s


def _session() -> aiohttp.ClientSession:
    # trust_env=False (the default, said out loud): loopback only, no proxy from the environment.
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_read=120), trust_env=False)


async def freeze(route: Route, timeout: float) -> dict[str, Any]:
    async with _session() as session:
        started = [asyncio.Event() for _ in range(CAP)]
        longs = [
            asyncio.create_task(
                stream_completion(
                    session, route, f"e2e-long-{i}", 8 + i, LONG_TOKENS + 4 * i, 1, first_token=started[i]
                )
            )
            for i in range(CAP)
        ]
        first_tokens = asyncio.gather(*(e.wait() for e in started))
        waiting: list[asyncio.Future[Any]] = [first_tokens, *longs]
        done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for t in longs:
            if t in done and t.exception() is not None:
                raise t.exception()  # type: ignore[misc]
        if first_tokens not in done:
            first_tokens.cancel()
            if finished := [f"e2e-long-{i}" for i, t in enumerate(longs) if t in done]:
                raise ClientFailure(
                    f"freeze: {finished[0]} finished before all 4 long requests were running: rank 1 never "
                    "reached its cap"
                )
            raise ClientFailure(f"freeze: the 4 long requests on rank 1 had no first token after {timeout:.0f} s")
        # Rank 1 now runs CAP requests: at its cap. The short ones go to rank 0, which has room.
        shorts = [
            asyncio.create_task(stream_completion(session, route, f"e2e-short-{i}", 4 + i, SHORT_TOKENS, 0))
            for i in range(CAP)
        ]
        long_res = await asyncio.wait_for(asyncio.gather(*longs), timeout)
        short_res = await asyncio.wait_for(asyncio.gather(*shorts), timeout)
    return {"longs": long_res, "shorts": short_res}


def load_specs() -> list[tuple[str, int, int, int | None]]:
    specs = []
    for i in range(LOAD_REQUESTS):
        rank = 1 if i % 4 == 0 else (0 if i % 8 == 1 else None)  # some pinned, most balanced
        specs.append((f"e2e-load-{i}", 1 + (i * 13) % 40, 1 + (i * 29) % 32, rank))
    return specs


async def load(route: Route, timeout: float) -> list[Stream]:
    async with _session() as session:
        tasks = [
            asyncio.create_task(stream_completion(session, route, rid, n_prompt, max_tokens, rank, n))
            for n, (rid, n_prompt, max_tokens, rank) in enumerate(load_specs())
        ]
        return await asyncio.wait_for(asyncio.gather(*tasks), timeout)

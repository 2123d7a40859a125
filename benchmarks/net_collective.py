"""``make bench-net``: the per-step collective across a set network delay (root; network namespaces).

    python -m benchmarks.net_collective [--sizes 2,4,8,16,32,64] [--delays 0,0.2,1] [--iters 25]

For each group size N, N real gloo ranks (torch only), each in a private network namespace of its own
whose only link is a TUN device; a relay (``benchmarks.delay_relay``) holds every packet between
namespaces for the phase's one-way delay. Per delay, each rank times the three ways of finding the
leader's count, interleaved and each after a barrier: the old gather (``all_gather`` of N one-element
int tensors, then max: what ``balance_gather()`` did before), ``all_reduce(MAX)``, and
``group_max`` (what it does now). A call's time is from the moment the last rank calls it to the moment
the last rank returns (one host: every rank reads the same monotonic clock); each rank also records
the CPU time its process spent in the call. ``benchmarks.net_report`` turns the samples into rounds
(extra time per unit of delay), CPU shares and the per-step cost at DP 32 and 128.

Ranks are forked from this process after torch is imported (64 fresh interpreters would need ~10 GB).
Every child dies with this process (parent-death signal) and its namespace dies with it, so an
interrupted or failed run leaves neither processes nor namespaces; this process kills and reaps its
children by pid on every way out.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from benchmarks import netns
from benchmarks.common import REPO
from benchmarks.delay_relay import DelayRelay, RelayClient, wait_for_socket
from vllm_ascend.core.group_max import group_max

SIZES = (2, 4, 8, 16, 32, 64)
DELAYS_MS = (0.0, 0.2, 1.0, 10.0)  # 10 ms: rounds from the 1 -> 10 ms slope, far above the CPU noise
COLLECTIVES = ("all_gather", "all_reduce", "group_max", "group_max_tcp")
WARMUP = 5
ITERS = 25
TUN = "ctun"
STORE_PORT = 29500  # every namespace is private: the same port everywhere, nothing else listens
ECHO_PORT = 29600
PINGS = 40
GROUP_TIMEOUT_S = 300.0
SIZE_TIMEOUT_S = 900.0


class BenchError(Exception):
    """One line: what failed and where (the report records it for that group size)."""


@dataclass(frozen=True)
class Plan:
    world: int
    delays_ms: tuple[float, ...]
    warmup: int
    iters: int
    control: str  # the relay's socket
    workdir: str  # samples and logs of the children
    parent: int


# --------------------------------------------------------------------------------------------------
# A rank (a forked child, in its own network namespace)


def _value(rank: int, world: int) -> int:
    """Distinct counts, the largest on a rank that depends on N (37 is odd: a permutation of ranks)."""
    return 1000 + (rank * 37) % world


def _collectives(rank: int, world: int, address: str) -> dict[str, Callable[[], int]]:
    group = dist.group.WORLD
    assert group is not None
    value = _value(rank, world)
    queue = [torch.zeros(1, dtype=torch.int) for _ in range(world)]

    def all_gather() -> int:  # balance_gather() before group_max, line for line
        count = torch.tensor([value], dtype=torch.int, device="cpu")
        dist.all_gather(queue, count, group=group)
        return max(int(t.item()) for t in queue)

    def all_reduce() -> int:
        count = torch.tensor([value], dtype=torch.int, device="cpu")
        dist.all_reduce(count, op=dist.ReduceOp.MAX, group=group)
        return int(count.item())

    def gloo_gather() -> int:  # balance_gather() before the exchange had connections of its own
        return group_max(value, group)

    def tcp_gather() -> int:  # balance_gather() now: the same exchange over its own TCP connections
        return group_max(value, group, host=address)

    return {"all_gather": all_gather, "all_reduce": all_reduce, "group_max": gloo_gather, "group_max_tcp": tcp_gather}


def _echo_server(address: str) -> None:
    """Rank 1 echoes bytes back, so that rank 0 can measure the link with a plain TCP ping-pong."""
    listener = socket.create_server((address, ECHO_PORT))

    def serve() -> None:
        while True:
            conn, _ = listener.accept()
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                while data := conn.recv(64):
                    conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()


def _one_way_us(peer: str) -> float:
    """Half the median round trip of a 1-byte TCP ping-pong to ``peer``: the link as the ranks see it."""
    with socket.create_connection((peer, ECHO_PORT)) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        samples = []
        for i in range(PINGS + 5):
            start = time.perf_counter_ns()
            conn.sendall(b"x")
            conn.recv(64)
            if i >= 5:
                samples.append((time.perf_counter_ns() - start) / 2e3)
    return statistics.median(samples)


def rank_main(rank: int, plan: Plan) -> None:
    netns.die_with_parent(plan.parent)
    netns.enter_private_network()
    address = netns.rank_address(rank)
    relay = RelayClient(plan.control)
    relay.register(address, netns.open_tun(TUN, address))
    os.environ["GLOO_SOCKET_IFNAME"] = TUN  # gloo's pairs use the TUN address, not a hostname lookup
    if rank == 1:
        _echo_server(address)
    timeout = datetime.timedelta(seconds=GROUP_TIMEOUT_S)
    store = dist.TCPStore(netns.rank_address(0), STORE_PORT, plan.world, rank == 0, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=plan.world, timeout=timeout)
    ops = _collectives(rank, plan.world, address)
    names = list(ops)
    expected = _value(0, plan.world) + max((r * 37) % plan.world for r in range(plan.world))
    samples: dict[str, dict[str, dict[str, list[int]]]] = {}
    link_us: dict[str, float] = {}
    errors: list[str] = []
    for delay in plan.delays_ms:
        dist.barrier()
        if rank == 0:
            relay.set_delay(delay)
        dist.barrier()  # the first barrier's packets crossed at the old delay; from here all at the new
        if rank == 0:
            link_us[repr(delay)] = _one_way_us(netns.rank_address(1))
        dist.barrier()
        for _ in range(plan.warmup):
            for name in names:
                ops[name]()
        phase: dict[str, dict[str, list[int]]] = {name: {"start": [], "end": [], "cpu": []} for name in names}
        for i in range(plan.iters):
            for k in range(len(names)):  # rotated: no collective always runs first after the barrier
                name = names[(i + k) % len(names)]
                dist.barrier()
                cpu0, start = time.process_time_ns(), time.monotonic_ns()
                got = ops[name]()
                end, cpu1 = time.monotonic_ns(), time.process_time_ns()
                phase[name]["start"].append(start)
                phase[name]["end"].append(end)
                phase[name]["cpu"].append(cpu1 - cpu0)
                if got != expected:
                    errors.append(f"{name} at {delay} ms: rank {rank} got {got}, expected {expected}")
        samples[repr(delay)] = phase
    dist.barrier()
    out = {"rank": rank, "samples": samples, "link_us": link_us, "errors": errors}
    Path(plan.workdir, f"rank-{rank}.json").write_text(json.dumps(out))
    dist.destroy_process_group()


def relay_main(plan: Plan) -> None:
    netns.die_with_parent(plan.parent)
    os.nice(-5)  # ahead of the ranks: a late relay is a longer delay than the one asked for
    DelayRelay(plan.control).serve_forever()


# --------------------------------------------------------------------------------------------------
# The parent: one group size at a time


def _fork(name: str, plan: Plan, target: Callable[[], None]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent decides
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        log = os.open(os.path.join(plan.workdir, f"{name}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        target()
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _last_error(log: Path) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def run_size(world: int, delays_ms: Sequence[float], iters: int, warmup: int, timeout_s: float) -> dict[str, Any]:
    """Samples of every collective at every delay for a group of ``world`` ranks; raises BenchError."""
    workdir = tempfile.mkdtemp(prefix=f"bench-net-{world}-")
    plan = Plan(world, tuple(delays_ms), warmup, iters, os.path.join(workdir, "relay.sock"), workdir, os.getpid())
    children: dict[int, str] = {}
    start = time.monotonic()
    try:
        children[_fork("relay", plan, lambda: relay_main(plan))] = "relay"
        wait_for_socket(plan.control, 10.0)
        for rank in range(world):
            children[_fork(f"rank-{rank}", plan, lambda rank=rank: rank_main(rank, plan))] = f"rank-{rank}"  # type: ignore[misc]
        ranks = {pid for pid, name in children.items() if name != "relay"}
        while ranks:
            if time.monotonic() - start > timeout_s:
                raise BenchError(f"N={world}: not finished after {timeout_s:g} s (raise --size-timeout?)")
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                time.sleep(0.05)
                continue
            name = children.pop(pid)
            if name == "relay" or os.waitstatus_to_exitcode(status) != 0:
                raise BenchError(f"N={world}: {name} failed: {_last_error(Path(workdir, f'{name}.log'))}")
            ranks.discard(pid)
        per_rank = [json.loads(Path(workdir, f"rank-{r}.json").read_text()) for r in range(world)]
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        shutil.rmtree(workdir, ignore_errors=True)
    return summarize(world, delays_ms, per_rank, time.monotonic() - start)


def summarize(world: int, delays_ms: Sequence[float], per_rank: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    """Per delay and collective: the median critical-path time (last call to last return) and CPU per rank."""
    errors = [e for r in per_rank for e in r["errors"]]
    phases: dict[str, Any] = {}
    for delay in delays_ms:
        key = repr(delay)
        phase = {}
        for name in COLLECTIVES:
            runs = [r["samples"][key][name] for r in per_rank]
            iters = len(runs[0]["start"])
            times = sorted(
                (max(run["end"][i] for run in runs) - max(run["start"][i] for run in runs)) / 1e6 for i in range(iters)
            )
            cpu = [c / 1e3 for run in runs for c in run["cpu"]]
            phase[name] = {
                "median_ms": statistics.median(times),
                "p10_ms": times[len(times) // 10],
                "p90_ms": times[(len(times) * 9) // 10],
                "cpu_us": statistics.median(cpu),
            }
        phases[key] = {"collectives": phase, "link_one_way_us": per_rank[0]["link_us"][key]}
    return {"world": world, "phases": phases, "errors": errors[:5], "error_count": len(errors), "wall_s": wall_s}


# --------------------------------------------------------------------------------------------------
# Command line


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(","))


def main(argv: list[str] | None = None) -> int:
    from benchmarks import net_report

    p = argparse.ArgumentParser(prog="python -m benchmarks.net_collective", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=lambda s: tuple(int(x) for x in s.split(",")), default=SIZES)
    p.add_argument("--delays", type=_floats, default=DELAYS_MS, help="one-way delays in ms; the first is the base")
    p.add_argument("--iters", type=int, default=ITERS)
    p.add_argument("--warmup", type=int, default=WARMUP)
    p.add_argument("--size-timeout", type=float, default=SIZE_TIMEOUT_S, help="seconds per group size")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    p.add_argument("--render-only", action="store_true", help="re-render the report from OUT/net_collective.json")
    args = p.parse_args(argv)
    if args.render_only:
        print(net_report.write(json.loads((args.out / "net_collective.json").read_text()), args.out))
        return 0
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        print("bench-net: error: needs root and /dev/net/tun (namespaces, TUN devices): run as root", file=sys.stderr)
        return 2
    if min(args.sizes) < 2 or args.delays[0] != 0.0 or len(args.delays) < 2:
        print("bench-net: error: sizes start at 2, delays at 0 with one more at least: see --help", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout` and kill: clean up like Ctrl-C
    start = time.monotonic()
    sizes: list[dict[str, Any]] = []
    try:
        for world in args.sizes:
            print(f"N={world}...", flush=True)
            try:
                result = run_size(world, args.delays, args.iters, args.warmup, args.size_timeout)
            except (BenchError, OSError) as exc:
                print(f"  failed: {exc}", flush=True)
                sizes.append({"world": world, "error": str(exc)})
                continue
            print(net_report.size_line(result), flush=True)
            sizes.append(result)
    except KeyboardInterrupt:  # run_size has already killed and reaped its children
        print("bench-net: interrupted: nothing written", file=sys.stderr)
        return 130
    data = {
        "torch": torch.__version__,
        "cores": os.cpu_count(),
        "delays_ms": list(args.delays),
        "iters": args.iters,
        "sizes": sizes,
        "wall_s": time.monotonic() - start,
    }
    text = net_report.write(data, args.out)
    print(text)
    failed = [s["world"] for s in sizes if "error" in s or s["error_count"]]
    if failed:
        print(f"bench-net: error: group sizes {failed} failed or got a wrong maximum: see the report", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

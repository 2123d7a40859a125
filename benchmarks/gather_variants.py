"""The gather's exchange, four ways, over loopback: CPU and wall per call (docs/benchmarks.md, bench-serve).

    python -m benchmarks.gather_variants [--sizes 2,4,8] [--iters 300]

N ranks (torch only, spawned), one gloo group. Per variant, 20 warm-up calls, then ``--iters`` timed calls
(process CPU time and wall, medians printed by rank 0):

- ``gloo``: ``group_max(value, group)``, the exchange over gloo's point-to-point messages;
- ``gloo .item()``: the same, reading each received value with ``.item()`` instead of indexing;
- ``gloo ahead``: the same, with the next call's receives posted before a call returns (two buffer sets);
- ``tcp``: ``group_max(value, group, host="127.0.0.1")``, what ``balance_gather()`` runs.

The ranks share this machine's cores, so read the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import datetime
import socket
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from vllm_ascend.core.group_max import _TAG, group_max, rounds

WARMUP = 20


def _gloo_item(value: int, group: dist.ProcessGroup, boxes: tuple[list[torch.Tensor], list[torch.Tensor]]) -> int:
    size, rank = group.size(), group.rank()
    inbox, outbox = boxes
    receives = [group.recv([inbox[k]], (rank - (1 << k)) % size, _TAG + k) for k in range(len(inbox))]
    best, sends = value, []
    for k in range(len(inbox)):
        outbox[k][0] = best
        sends.append(group.send([outbox[k]], (rank + (1 << k)) % size, _TAG + k))
        receives[k].wait()
        best = max(best, int(inbox[k].item()))
    for send in sends:
        send.wait()
    return best


class _Ahead:
    """The exchange with the next call's receives posted at the end of this one."""

    def __init__(self, group: dist.ProcessGroup) -> None:
        self.group, self.n = group, rounds(group.size())
        self.sets = [[torch.zeros(1, dtype=torch.int64) for _ in range(self.n)] for _ in range(2)]
        self.out = [torch.zeros(1, dtype=torch.int64) for _ in range(self.n)]
        self.cur = 0
        self.pending = self._post(0)

    def _post(self, which: int) -> list[dist.Work]:
        size, rank = self.group.size(), self.group.rank()
        tag = _TAG + 32
        return [self.group.recv([self.sets[which][k]], (rank - (1 << k)) % size, tag + k) for k in range(self.n)]

    def __call__(self, value: int) -> int:
        size, rank = self.group.size(), self.group.rank()
        inbox, best, sends = self.sets[self.cur], value, []
        for k in range(self.n):
            self.out[k][0] = best
            sends.append(self.group.send([self.out[k]], (rank + (1 << k)) % size, _TAG + 32 + k))
            self.pending[k].wait()
            best = max(best, int(inbox[k].item()))
        for send in sends:
            send.wait()
        self.cur ^= 1
        self.pending = self._post(self.cur)
        return best


def _rank_main(rank: int, size: int, port: int, iters: int, results: mp.Queue) -> None:
    timeout = datetime.timedelta(seconds=120)
    store = dist.TCPStore("127.0.0.1", port, size, rank == 0, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=size, timeout=timeout)
    group = dist.group.WORLD
    assert group is not None
    n = rounds(size)
    boxes = (
        [torch.zeros(1, dtype=torch.int64) for _ in range(n)],
        [torch.zeros(1, dtype=torch.int64) for _ in range(n)],
    )
    ahead = _Ahead(group)
    ops: dict[str, Callable[[], int]] = {
        "gloo": lambda: group_max(rank, group),
        "gloo .item()": lambda: _gloo_item(rank, group, boxes),
        "gloo ahead": lambda: ahead(rank),
        "tcp": lambda: group_max(rank, group, host="127.0.0.1"),
    }
    out = {}
    for name, op in ops.items():
        for _ in range(WARMUP):
            op()
        dist.barrier()
        cpu, wall = [], []
        for _ in range(iters):
            c0, t0 = time.process_time_ns(), time.perf_counter_ns()
            if op() != size - 1:
                raise AssertionError(f"{name}: wrong maximum on rank {rank}")
            wall.append(time.perf_counter_ns() - t0)
            cpu.append(time.process_time_ns() - c0)
        out[name] = (statistics.median(cpu) / 1e3, statistics.median(wall) / 1e3)
    dist.barrier()
    if rank == 0:
        results.put(out)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gather_variants", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="2,4,8")
    p.add_argument("--iters", type=int, default=300)
    args = p.parse_args(argv)
    ctx = mp.get_context("spawn")
    print("| N | variant | CPU us per call | wall us per call |\n|---|---|---|---|")
    for size in (int(x) for x in args.sizes.split(",")):
        results = ctx.Queue()
        port = _free_port()
        procs = [ctx.Process(target=_rank_main, args=(r, size, port, args.iters, results)) for r in range(size)]
        for proc in procs:
            proc.start()
        out = results.get(timeout=600)
        for proc in procs:
            proc.join(timeout=60)
        for name, (cpu, wall) in out.items():
            print(f"| {size} | {name} | {cpu:.0f} | {wall:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

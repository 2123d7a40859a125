"""``balance_gather()`` per step over real gloo groups vs a same-size gloo ``all_reduce`` (the floor)."""

from __future__ import annotations

import datetime
import multiprocessing as mp
import statistics
import time
from typing import Any

from balance_dev.dp_sim import free_port
from benchmarks.common import table

GROUP_SIZES = (2, 4, 8)
ITERS = 300
ROUNDS = 5


def _rank(rank: int, world: int, port: int, results: Any) -> None:
    import torch
    import torch.distributed as dist
    from vllm_ascend._generated.balance_scheduler import BalanceScheduler

    timeout = datetime.timedelta(seconds=60)
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    # balance_gather() only reads these attributes; the scheduler's other state is not involved.
    scheduler: Any = object.__new__(BalanceScheduler)
    scheduler._balance_enabled = True
    scheduler.running = [object()] * (rank + 1)
    scheduler.num_waiting_for_streaming_input = 0  # read by upstream's count from 0.25 on
    scheduler.balance_queue = [torch.tensor([0], dtype=torch.int) for _ in range(world)]
    scheduler.dp_group = dist.group.WORLD
    floor_tensor = torch.tensor([rank], dtype=torch.int)

    def gather() -> None:
        scheduler.balance_gather()

    def all_reduce() -> None:
        dist.all_reduce(floor_tensor, group=dist.group.WORLD)

    raw_out = [torch.tensor([0], dtype=torch.int) for _ in range(world)]

    def raw_all_gather() -> None:
        dist.all_gather(raw_out, floor_tensor, group=dist.group.WORLD)

    fns = (("balance_gather", gather), ("all_reduce", all_reduce), ("all_gather", raw_all_gather))
    timings: dict[str, list[float]] = {name: [] for name, _ in fns}
    for _, fn in fns:  # warm-up
        for _ in range(20):
            fn()
    for _ in range(ROUNDS):
        for name, fn in fns:
            dist.barrier()
            start = time.perf_counter()
            for _ in range(ITERS):
                fn()
            timings[name].append((time.perf_counter() - start) / ITERS * 1e6)
    assert [t.item() for t in scheduler.balance_queue] == list(range(1, world + 1))
    assert scheduler.balance_leader_running == world
    if rank == 0:
        results.put({k: statistics.median(v) for k, v in timings.items()})
    dist.barrier()
    dist.destroy_process_group()


def run() -> str:
    ctx = mp.get_context("spawn")
    rows = []
    for world in GROUP_SIZES:
        results = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=_rank, args=(r, world, port, results)) for r in range(world)]
        for p in procs:
            p.start()
        try:
            result = results.get(timeout=600)
        finally:
            for p in procs:
                p.join(timeout=60)
                if p.is_alive():
                    p.kill()
        ratio = result["balance_gather"] / result["all_reduce"]
        rows.append(
            [
                world,
                f"{result['balance_gather']:.1f}",
                f"{result['all_reduce']:.1f}",
                f"{ratio:.2f}x",
                f"{result['all_gather']:.1f}",
                f"{result['balance_gather'] / result['all_gather']:.2f}x",
            ]
        )
    return "\n\n".join(
        [
            f"### `balance_gather()` per call over real gloo groups (loopback, {ITERS} calls, median of "
            f"{ROUNDS} rounds; microseconds)",
            table(
                [
                    "processes",
                    "balance_gather",
                    "all_reduce (floor)",
                    "vs floor",
                    "raw all_gather",
                    "vs raw all_gather",
                ],
                rows,
            ),
            "Goal: at most 1.5x. The machine has 2 cores: groups of 4 and 8 processes are oversubscribed, "
            "so their absolute times measure scheduling as much as gloo.",
        ]
    )


if __name__ == "__main__":
    print(run())

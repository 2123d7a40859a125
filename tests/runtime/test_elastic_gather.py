"""Elastic DP: the gather follows the live group the engine core injects, whatever the config said.

Three real processes, each with a real balance scheduler built from a config that says
data_parallel_size=4 (what ``__init__`` saw before the group was resized), and real gloo groups
that change between steps: all three ranks, then a scale-down to two, then three again. Every
step's leader count must be the maximum of the running counts over exactly the live group.
"""

from __future__ import annotations

import datetime
import socket
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp

RANKS = 3
STALE_CONFIG_DP = 4
# (group members, requests each rank adds before the step): running counts grow by what is added.
STEPS: list[tuple[list[int], list[int]]] = [
    ([0, 1, 2], [1, 2, 3]),  # 3 ranks: leader 3
    ([0, 1], [1, 0, 0]),  # scale down, rank 2 gone: ranks 0 and 1 run 2 and 2
    ([0, 1, 2], [2, 0, 0]),  # scale back up: rank 0 leads with 4
]


def _rank_main(rank: int, port: int, results: Any) -> None:
    import vllm_ascend.patch.platform.patch_balance_schedule as patch
    from balance_dev.scenarios import build
    from balance_dev.vllm_objects import fake_model_output, make_request

    store = dist.TCPStore("127.0.0.1", port, RANKS, rank == 0, timeout=datetime.timedelta(seconds=600))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=RANKS, timeout=datetime.timedelta(seconds=120))
    groups = {tuple(m): dist.new_group(m, backend="gloo") for m in ([0, 1, 2], [0, 1])}
    knobs = {"max_num_seqs": 8, "data_parallel_size": STALE_CONFIG_DP}
    scheduler = build(patch.BalanceScheduler, knobs, True)
    leaders = []
    for step, (members, adds) in enumerate(STEPS):
        if rank not in members:
            leaders.append(None)
            continue
        for i in range(adds[rank]):
            scheduler.add_request(make_request(f"s{step}-r{rank}-{i}", 8, 1000))
        out = scheduler.schedule()
        scheduler.update_from_output(out, fake_model_output(out, scheduler))
        scheduler.dp_group = groups[tuple(members)]  # what the engine hook injects each step
        scheduler.balance_gather()
        leaders.append((len(scheduler.running), scheduler.balance_leader_running))
    results.put((rank, leaders))
    dist.barrier()
    dist.destroy_process_group()


def test_the_gather_resizes_with_the_live_group_between_steps() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(rank, port, results), daemon=True) for rank in range(RANKS)]
    for p in procs:
        p.start()
    try:
        by_rank = dict(results.get(timeout=900) for _ in procs)
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    assert [p.exitcode for p in procs] == [0] * RANKS
    for step, (members, _adds) in enumerate(STEPS):
        running = {rank: by_rank[rank][step][0] for rank in members}
        leaders = {by_rank[rank][step][1] for rank in members}
        assert leaders == {max(running.values())}, (step, running, leaders)
    # The oracle's own inputs: what the running counts were, so the test is not vacuous.
    assert [max(by_rank[r][s][0] for r in m) for s, (m, _) in enumerate(STEPS)] == [3, 2, 4]
    assert by_rank[2][1] is None  # rank 2 sat out the scaled-down step

"""The gather's exchange over real gloo groups: the exact maximum on every rank, at every group size.

One pool of 32 real processes (torch only, no vLLM: each costs an import of torch) builds a gloo
subgroup per size from a scattered set of world ranks, so group ranks differ from world ranks, and
runs the exchange with distinct and with equal values. The oracle is Python's ``max`` over the
values the parent chose. A last subgroup, with a short timeout, has one member that never joins.
"""

from __future__ import annotations

import datetime
import math
import random
import socket
import time
from typing import Any

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from vllm_ascend.core.group_max import group_max, network_delays, rounds

WORLD = 32
SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 32]
ABSENT_TIMEOUT_S = 3.0


def _members(size: int) -> list[int]:
    """World ranks in a group of ``size``: scattered, so a group's rank is not the world's."""
    return sorted(random.Random(size).sample(range(WORLD), size))


def _values(size: int, trial: int) -> list[int]:
    if trial == 0:  # distinct, the maximum at a position that depends on the size
        return random.Random(1000 + size).sample(range(10_000), size)
    if trial == 1:  # all equal
        return [7] * size
    return [0] * (size - 1) + [2**40]  # one large value on the last group rank (int64 on the wire)


def _rank_main(rank: int, port: int, results: Any) -> None:
    store = dist.TCPStore("127.0.0.1", port, WORLD, rank == 0, timeout=datetime.timedelta(seconds=300))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD, timeout=datetime.timedelta(seconds=120))
    out: list[tuple[Any, ...]] = []
    for size in SIZES:
        members = _members(size)
        group = dist.new_group(members, backend="gloo")  # every world rank takes part in creating it
        if rank in members:
            group_rank = members.index(rank)
            for trial in range(3):
                got = group_max(_values(size, trial)[group_rank], group)
                out.append(("max", size, trial, group_rank, got))
            for trial in range(3):  # the same exchange over its own TCP connections (set up by the first)
                got = group_max(_values(size, trial)[group_rank], group, host="127.0.0.1")
                out.append(("sock", size, trial, group_rank, got))
    # Every world rank takes part in creating a group, so all three short-timeout groups come first.
    short = datetime.timedelta(seconds=ABSENT_TIMEOUT_S)
    absent, absent_tcp, skipper = (dist.new_group([0, 1, 2], backend="gloo", timeout=short) for _ in range(3))
    # Over TCP, a rank that took part in the set-up and one call, then skips the next: the others wait it out.
    if rank in (0, 1, 2):
        group_max(rank, skipper, host="127.0.0.1")
        if rank != 2:
            out.append(_absent("skipped-sock", rank, skipper, "127.0.0.1"))
    # The absent rank: rank 2 never calls the exchange (over gloo, and over TCP: there it misses the set-up).
    if rank in (0, 1):
        out.append(_absent("absent", rank, absent, None))
        out.append(_absent("absent-sock", rank, absent_tcp, "127.0.0.1"))
    results.put((rank, out))
    # Keep every process alive until all are done: a rank leaving early would break others' groups.
    store.add("done", 1)
    while int(store.add("done", 0)) < WORLD:
        time.sleep(0.05)


def _absent(name: str, rank: int, group: Any, host: str | None) -> tuple[Any, ...]:
    start = time.monotonic()
    try:
        group_max(rank, group, host=host)
        return (name, rank, "returned", time.monotonic() - start)
    except RuntimeError as error:
        return (name, rank, f"raised: {str(error).splitlines()[0][:200]}", time.monotonic() - start)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def pool_results() -> list[tuple[Any, ...]]:
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank_main, args=(rank, port, results), daemon=True) for rank in range(WORLD)]
    for p in procs:
        p.start()
    try:
        collected = [results.get(timeout=600) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    return [row for _rank, rows in collected for row in rows]


@pytest.mark.parametrize("size", SIZES)
def test_every_rank_gets_the_exact_maximum(pool_results: list[tuple[Any, ...]], size: int) -> None:
    for transport in ("max", "sock"):
        for trial in range(3):
            got = {row[3]: row[4] for row in pool_results if row[:3] == (transport, size, trial)}
            assert sorted(got) == list(range(size)), transport  # every member answered
            assert set(got.values()) == {max(_values(size, trial))}, transport


@pytest.mark.parametrize("case", ["absent", "absent-sock", "skipped-sock"])
def test_a_rank_that_never_joins_fails_the_others_by_the_groups_timeout(
    pool_results: list[tuple[Any, ...]], case: str
) -> None:
    absent = [row for row in pool_results if row[0] == case]
    assert sorted(row[1] for row in absent) == [0, 1]
    for _, _rank, outcome, waited in absent:
        assert outcome.startswith("raised:"), outcome
        # The group's timeout, not forever (and not instantly: it did wait for the peer).
        assert ABSENT_TIMEOUT_S * 0.9 <= waited < ABSENT_TIMEOUT_S + 60


@pytest.mark.parametrize(
    ("size", "expected"), [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (8, 3), (9, 4), (17, 5), (32, 5), (128, 7)]
)
def test_rounds_are_ceil_log2(size: int, expected: int) -> None:
    assert rounds(size) == expected
    # The bound: at most log2(N) + 2 sequential network delays.
    assert network_delays(size) <= (math.log2(size) + 2 if size > 1 else 0)

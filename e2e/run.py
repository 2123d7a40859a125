"""``make e2e``: a real vLLM engine (CPU build, DP=2, a tiny MoE model), balance on and off.

Writes the model, then starts the driver twice, each in its own session under a hard timeout:

1. balance on: the ``freeze`` scenario, then the ``load`` scenario on the same engine (one start);
2. balance off: the ``freeze`` scenario.

The driver asserts on the outputs; this runner asserts on what the engine cores ran (the probe's
per-rank files), that no process of a run outlives it, and prints the summary. Any failure is one
line ``make e2e: FAILED: ...`` (plus the tail of that run's log) and exit 1; nothing is skipped.

    .venv-e2e/bin/python e2e/run.py [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
UPSTREAM_ENGINE = "vllm.v1.engine.core.DPEngineCoreProc"


def is_balance_engine(qualname: str) -> bool:
    return qualname.startswith("vllm_ascend.") and qualname.endswith(".BalanceDPEngineCoreProc")


def is_balance_scheduler(mro: list[str]) -> bool:
    """A scheduler class of the runtime (whichever upstream scheduler it extends)."""
    return any(c.startswith("vllm_ascend.") for c in mro)


# name, balance, scenarios, hard timeout (s) for the whole driver process (start, scenarios, shutdown)
RUNS = [
    ("balance on", "on", "freeze,load", 420),
    ("balance off", "off", "freeze", 300),
]


class Failed(Exception):
    pass


def short(qualname: str) -> str:
    return qualname.rsplit(".", 1)[-1]


def session_processes(sid: int) -> list[str]:
    """Processes (other than zombies) still in session ``sid``: what a run left behind."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        state, session = fields[0], int(fields[3])
        if session == sid and state != "Z":
            found.append(f"{entry} {name}")
    return found


def run_process(cmd: list[str], env: dict[str, str], log_path: str, timeout: float, what: str) -> None:
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise Failed(f"{what}: no result after {timeout:.0f} s (hang?), killed") from None
    deadline = time.monotonic() + 10
    while (left := session_processes(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        os.killpg(proc.pid, signal.SIGKILL)
        raise Failed(f"{what}: processes outlived the run: {left}")
    if rc != 0:
        raise Failed(f"{what}: exited {rc}")


def tail(path: str, n: int = 25) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def check_engine_cores(report: dict[str, Any], balance: bool) -> list[str]:
    """What each engine core ran, from the probe's last snapshot. Returns failures."""
    problems = []
    scenarios = report["scenarios"]
    last = scenarios[list(scenarios)[-1]]["probe"]
    if sorted(last) != ["rank0", "rank1"]:
        return [f"probe files for DP ranks 0 and 1 expected, got {sorted(last)} (plugin not loaded in engine cores?)"]
    for rank, p in sorted(last.items()):
        if balance:
            if not is_balance_engine(p["engine_core_class"]):
                problems.append(f"{rank}: engine core is {p['engine_core_class']}, expected BalanceDPEngineCoreProc")
            if not is_balance_scheduler(p["scheduler_mro"]) or p["balance_enabled"] is not True:
                problems.append(
                    f"{rank}: scheduler {p['scheduler_class']} (balance_enabled={p['balance_enabled']}) "
                    "is not a balance scheduler with balance on"
                )
        else:
            if p["engine_core_class"] != UPSTREAM_ENGINE:
                problems.append(f"{rank}: engine core is {p['engine_core_class']}, expected upstream {UPSTREAM_ENGINE}")
            if p["balance_enabled"] or p["has_balance_queue"] or p["frozen_steps"]:
                state = {k: p[k] for k in ("balance_enabled", "has_balance_queue", "frozen_steps")}
                problems.append(f"{rank}: balance state with balance off: {state}")
    if balance and "freeze" in scenarios:
        frozen = scenarios["freeze"]["probe"].get("rank0", {}).get("frozen_steps", 0)
        if not frozen > 0:
            problems.append("freeze: rank 0 never saw its admission gate closed by rank 1 at its cap (frozen steps 0)")
    return problems


def describe(name: str, report: dict[str, Any], wall: float) -> list[str]:
    lines = [
        f'run "{name}": engine start {report["engine_start_s"]} s, shutdown {report["shutdown_s"]} s, '
        f"no process left, wall {wall:.0f} s"
    ]
    scenarios = report["scenarios"]
    last = scenarios[list(scenarios)[-1]]["probe"]
    for rank, p in sorted(last.items()):
        lines.append(
            f"  {rank}: {short(p['engine_core_class'])} + {short(p['scheduler_class'])} "
            f"(balance_enabled={p['balance_enabled']}, cap {p['max_num_running_reqs']})"
        )
    prev = {rank: 0 for rank in last}
    for scen, res in scenarios.items():
        frozen = {rank: p["frozen_steps"] - prev.get(rank, 0) for rank, p in res["probe"].items()}
        prev = {rank: p["frozen_steps"] for rank, p in res["probe"].items()}
        frozen_txt = " ".join(f"{rank}={n}" for rank, n in sorted(frozen.items()))
        if scen == "freeze":
            lines.append(
                f"  freeze: 4 long on rank 1 (at cap), 4 short on rank 0: first long done "
                f"{res['first_long_finished_s']:.2f} s, first short token {res['first_short_token_s']:.2f} s, "
                f"shorts early {len(res['short_before_first_long_finished'])}/4, frozen steps {frozen_txt}, "
                f"{res['wall_s']} s"
            )
        else:
            lines.append(
                f"  load: {res['requests']} requests, {res['tokens']} tokens, all complete, "
                f"frozen steps {frozen_txt}, {res['wall_s']} s"
            )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", action="store_true", help="keep the work folder (model, logs, reports)")
    args = ap.parse_args()
    t0 = time.monotonic()
    work = tempfile.mkdtemp(prefix="balance-e2e-")
    py = sys.executable
    env = dict(os.environ)
    env.update(
        VLLM_CPU_OMP_THREADS_BIND="nobind",
        OMP_NUM_THREADS="1",
        VLLM_CPU_KVCACHE_SPACE="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        VLLM_CACHE_ROOT=os.path.join(work, "vllm-cache"),
    )
    passed, failed, summary = 0, 0, []
    try:
        from importlib import metadata

        summary.append(
            f"make e2e: vLLM {metadata.version('vllm-cpu')} (vllm-cpu), tiny Qwen3-MoE (4 experts, top-2, "
            "bf16), DP=2, max_num_seqs=4; test-only CPU shims: gloo all_gatherv/reduce_scatterv, MoE SiLU"
        )
        model = os.path.join(work, "model")
        run_process(
            [py, os.path.join(HERE, "make_model.py"), model],
            env,
            os.path.join(work, "model.log"),
            180,
            "writing the tiny MoE model",
        )
        for name, balance, scenarios, timeout in RUNS:
            slug = name.replace(" ", "-")
            probe_dir = os.path.join(work, f"probe-{slug}")
            os.makedirs(probe_dir)
            report_path = os.path.join(work, f"{slug}.json")
            log_path = os.path.join(work, f"{slug}.log")
            run_env = dict(env, BALANCE_E2E_PROBE_DIR=probe_dir)
            cmd = [
                py,
                os.path.join(HERE, "driver.py"),
                "--model",
                model,
                "--balance",
                balance,
                "--scenarios",
                scenarios,
                "--report",
                report_path,
                "--probe-dir",
                probe_dir,
            ]
            t1 = time.monotonic()
            try:
                run_process(cmd, run_env, log_path, timeout, f'run "{name}"')
            except Failed as e:
                error = ""
                if os.path.exists(report_path):
                    with open(report_path) as f:
                        error = json.load(f).get("error", "")
                detail = f": {error}" if error else ""
                raise Failed(f"{e}{detail}\n--- last lines of {log_path}:\n{tail(log_path)}") from None
            with open(report_path) as f:
                report = json.load(f)
            summary.extend(describe(name, report, time.monotonic() - t1))
            problems = check_engine_cores(report, balance == "on")
            if balance == "off":
                early = report["scenarios"]["freeze"]["short_before_first_long_finished"]
                if len(early) != 4:
                    problems.append(
                        f"freeze (balance off): the balance-on freeze check should fail here for all 4 "
                        f"short requests, it did for {len(early)}: the check has no teeth"
                    )
                else:
                    summary.append(
                        "  negative control: here the balance-on checks fail as they must "
                        "(4/4 short requests early, rank0 frozen steps 0)"
                    )
            if problems:
                raise Failed(f'run "{name}": ' + "; ".join(problems))
            passed += len(report["scenarios"])
    except Failed as e:
        failed += 1
        print("\n".join(summary))
        print(f"make e2e: FAILED: {e}  (work folder kept: {work})")
        print(f"e2e: {passed} passed, {failed} failed")
        return 1
    summary.append(f"make e2e: total wall {time.monotonic() - t0:.0f} s")
    print("\n".join(summary))
    print(f"e2e: {passed} passed, {failed} failed")
    if args.keep:
        print(f"work folder: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

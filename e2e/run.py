"""``make e2e``: balance scheduling through ``vllm serve`` (CPU build, DP=2, a tiny MoE model), on loopback.

Runs, one after the other, each process tree in its own session under hard timeouts:

1. refusal: balance on with a dense model (no experts): start-up must fail, saying why in vLLM's log;
2. ``vllm serve`` (internal LB), balance on: the ``freeze`` then the ``load`` scenario on one start;
3. the same with balance off (``freeze``): the negative control, where the balance-on checks fail;
4. ``headless`` (two "nodes"), balance on: ``freeze`` then ``load``;
5. ``external LB`` (one server per rank), balance on: ``freeze`` then ``load``;
6. ``Ray`` (``--data-parallel-backend ray``, engine cores as Ray actors on a loopback Ray head), balance
   on: ``freeze`` then ``load``.

The HTTP client (``client.py``) streams completions and times every token; the probe plugin
(``e2e/probe``) says what each engine core ran and admitted; the servers' own output must carry the
runtime's start-up line per rank (``server_log.py``). Every socket of every process tree must be on
127.0.0.1, and no process may outlive its tree's shutdown. The first failure is one line
``make e2e: FAILED: <what>`` plus the end of that run's log, exit 1; nothing is skipped.

    .venv-e2e/bin/python e2e/run.py [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from typing import Any

import aiohttp
import client
import server_log
import topologies
from checks import Checks
from procs import (
    STOP_TIMEOUT_S,
    Failed,
    Tree,
    check_alive,
    free_ports,
    processes_with_env,
    socket_report,
    stop,
    wait_api_servers,
    wait_healthy,
    wait_logged,
)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

START_TIMEOUT_S = 600.0  # one topology's start, all trees: 40-90 s idle, 3+ min on 2 loaded cores
SCENARIO_TIMEOUT_S = 240.0  # each scenario: seconds when it works
REFUSAL_TIMEOUT_S = 420.0  # the dense model's start-up until it fails

# (key for --only and the timings, topology or "refusal", balance): the order `make e2e` runs them in.
RUNS = [
    ("refusal", "refusal", True),
    ("vllm serve", "vllm serve", True),
    ("vllm serve off", "vllm serve", False),
    ("headless", "headless", True),
    ("external LB", "external LB", True),
    ("Ray", "Ray", True),
]
REFUSAL = "balance scheduling is enabled but vLLM runs its DP engine core only for"


def read_probe(probe_dir: str) -> dict[str, Any]:
    out = {}
    for name in sorted(os.listdir(probe_dir)):
        if name.startswith("rank") and name.endswith(".json"):
            with open(os.path.join(probe_dir, name)) as f:
                out[name[: -len(".json")]] = json.load(f)
    return out


def dump(path: str, streams: list[client.Stream]) -> None:
    """The client's view of a scenario, kept in the work folder (``--keep``, or after a failure)."""
    with open(path, "w") as f:
        json.dump([dataclasses.asdict(s) for s in streams], f)


def base_env(work: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        # vLLM's default log level and format: the runtime's lines must show without any of these.
        if k not in ("VLLM_LOGGING_LEVEL", "VLLM_CONFIGURE_LOGGING", "VLLM_LOGGING_CONFIG_PATH", "VLLM_LOGGING_PREFIX")
    }
    env.update(
        VLLM_CPU_OMP_THREADS_BIND="nobind",
        OMP_NUM_THREADS="1",
        VLLM_CPU_KVCACHE_SPACE="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        # The address vLLM reports for this host (a second machine would give its own): without it,
        # vLLM asks the routing table for one, which is not loopback.
        VLLM_HOST_IP="127.0.0.1",
        VLLM_CACHE_ROOT=os.path.join(work, "vllm-cache"),  # shared: later starts reuse model inspection
        PYTHONUNBUFFERED="1",
    )
    return env


class Runner:
    def __init__(self, work: str, env: dict[str, str], vllm_version: str) -> None:
        self.work = work
        self.env = env
        self.vllm_version = vllm_version
        self.checks = Checks(vllm_version)
        self.passed = 0

    # -- one topology ------------------------------------------------------------------------
    def topology(self, name: str, model: str, balance: bool) -> None:
        slug = f"{name.replace(' ', '-')}-{'on' if balance else 'off'}"
        topo = topologies.build(name, free_ports(3))
        probe_dir = os.path.join(self.work, f"probe-{slug}")
        os.makedirs(probe_dir)
        env = dict(self.env, BALANCE_E2E_PROBE_DIR=probe_dir)
        head: Tree | None = None
        if topo.ray_head_port is not None:
            env = topologies.ray_env(env, self.work, topo.ray_head_port)
            head = Tree(
                f'"{name}" Ray head',
                topologies.ray_head_args(topo.ray_head_port, env["RAY_TMPDIR"]),
                os.path.join(self.work, f"{slug}-ray-head.log"),
                env,
                ROOT,
            )
        trees = [
            Tree(
                f'"{name}" {node.name}',
                topologies.serve_args(model, balance) + list(node.flags),
                os.path.join(self.work, f"{slug}-{i}.log"),
                env,
                ROOT,
            )
            for i, node in enumerate(topo.nodes)
        ]
        every = trees + ([head] if head else [])
        what = f'topology "{name}" (balance {"on" if balance else "off"})'
        t0 = time.monotonic()
        try:
            if head is not None:
                head.start()
                wait_logged(head, "Ray runtime started", t0 + START_TIMEOUT_S)
            for tree in trees:
                tree.start()
            for url in topo.health_urls():
                wait_healthy(url, every, t0 + START_TIMEOUT_S)
            api_servers = {
                node.name: wait_api_servers(tree, every, t0 + START_TIMEOUT_S)
                for node, tree in zip(topo.nodes, trees, strict=True)
                if node.port is not None
            }
            ready_s = time.monotonic() - t0
            t1 = time.monotonic()
            freeze = self.scenario(what, trees, client.freeze(topo.route, SCENARIO_TIMEOUT_S))
            freeze["wall_s"] = time.monotonic() - t1
            probe_freeze = read_probe(probe_dir)
            dump(os.path.join(self.work, f"freeze-{slug}.json"), freeze["longs"] + freeze["shorts"])
            load: dict[str, Any] | None = None
            if balance:
                t2 = time.monotonic()
                streams = self.scenario(what, trees, client.load(topo.route, SCENARIO_TIMEOUT_S))
                load = {"streams": streams, "wall_s": time.monotonic() - t2}
                dump(os.path.join(self.work, f"load-{slug}.json"), streams)
            probe = read_probe(probe_dir)
            check_alive(every, "while serving")
            sockets = socket_report(every)
            # The servers first (vLLM takes its actors down through Ray), then Ray itself.
            stop_s = stop(trees, STOP_TIMEOUT_S)
            if head is not None:
                stop_s += stop([head], STOP_TIMEOUT_S)
                if left := processes_with_env("RAY_TMPDIR", env["RAY_TMPDIR"]):
                    raise Failed(f"{what}: Ray processes outlived their head's session: {left[:6]}", head.log_path)
        except BaseException:
            for tree in every:
                tree.kill()
            raise
        wall = time.monotonic() - t0
        if sockets.off_loopback:
            raise Failed(f"{what}: sockets outside loopback: {sockets.off_loopback[:6]}", trees[0].log_path)
        if not sockets.seen:
            raise Failed(f"{what}: no inet socket seen in the process trees: the loopback check saw nothing")
        wildcard = (
            f" ({len(sockets.wildcard_listeners)} listening on the wildcard address: "
            f"{', '.join(sockets.wildcard_listeners)})"
            if sockets.wildcard_listeners
            else ""
        )

        api = ", ".join(f"{node} {n}" for node, n in api_servers.items())
        self.checks.summary.append(
            f'topology "{name}", balance {"on" if balance else "off"}: {topo.description} (API servers: {api}); '
            f"ready {ready_s:.0f} s, shutdown {stop_s:.1f} s, no process left, wall {wall:.0f} s; "
            f"{sockets.seen} inet sockets, every connection 127.0.0.1 to 127.0.0.1{wildcard}"
            + (f"; Ray head on 127.0.0.1:{topo.ray_head_port}, stopped with it" if head else "")
        )
        problems = self.checks.check_engine_cores(topo, probe, balance)
        problems += self.checks.check_logs(topo, trees, probe, balance)
        problems += self.checks.check_routing(probe, load is not None)
        problems += self.checks.check_freeze(freeze, probe_freeze, balance)
        if load is not None:
            problems += self.checks.check_load(load, probe_freeze, probe)
        if problems:
            raise Failed(f"{what}: " + "; ".join(problems), trees[0].log_path)
        self.passed += 1

    def scenario(self, what: str, trees: list[Tree], coro: Any) -> Any:
        try:
            return asyncio.run(coro)
        except client.ClientFailure as e:
            raise Failed(f"{what}: {e}", trees[0].log_path) from None
        except (TimeoutError, asyncio.TimeoutError):
            raise Failed(f"{what}: no result after {SCENARIO_TIMEOUT_S:.0f} s (hang?)", trees[0].log_path) from None
        except aiohttp.ClientError as e:
            raise Failed(f"{what}: HTTP client error: {type(e).__name__}: {e}", trees[0].log_path) from None

    # -- the refusal -----------------------------------------------------------------------------
    def refusal(self, dense_model: str) -> None:
        port = free_ports(1)[0]
        # One API server (one process fewer to start): the refusal is the engine core's.
        flags = ["--host", "127.0.0.1", "--port", str(port), "--api-server-count", "1"]
        tree = Tree(
            "refusal (dense model)",
            [*topologies.serve_args(dense_model, True), *flags],
            os.path.join(self.work, "refusal.log"),
            self.env,
            ROOT,
        )
        t0 = time.monotonic()
        tree.start()
        try:
            assert tree.proc is not None
            rc = tree.proc.wait(timeout=REFUSAL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            tree.kill()
            raise Failed(
                f"refusal: balance on with a dense model still running after {REFUSAL_TIMEOUT_S:.0f} s: "
                "start-up must fail",
                tree.log_path,
            ) from None
        except BaseException:  # Ctrl-C: the tree has its own session, so nothing else takes it down
            tree.kill()
            raise
        took = time.monotonic() - t0
        stop([tree], STOP_TIMEOUT_S)
        lines = server_log.error_lines(tree.log_text(), REFUSAL)
        if rc == 0 or not lines:
            raise Failed(
                f"refusal: balance on with a dense model: exit {rc}, expected a failed start-up with an ERROR line "
                f"'{REFUSAL} ...' in vLLM's format in the server's output ({len(lines)} found)",
                tree.log_path,
            )
        self.checks.summary.append(
            f"refusal: balance on, dense Qwen3 (no experts), DP=2: start-up failed (exit {rc}) in {took:.0f} s, "
            f"no process left; log: {lines[0].split('] ', 1)[1]}"
        )
        self.passed += 1


def write_models(work: str, env: dict[str, str]) -> tuple[str, str]:
    paths = []
    for kind in ("moe", "dense"):
        path = os.path.join(work, f"model-{kind}")
        proc = subprocess.run(
            [sys.executable, os.path.join(HERE, "make_model.py"), path, kind],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if proc.returncode != 0:
            raise Failed(f"writing the tiny {kind} model: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
        paths.append(path)
    return paths[0], paths[1]


def tail(path: str, n: int = 30) -> str:
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()[-n:]
    except OSError:
        return ""
    return "\n".join(f"  | {line}" for line in lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", action="store_true", help="keep the work folder (models, logs, probe files)")
    ap.add_argument(
        "--only",
        action="append",
        choices=[r[0] for r in RUNS],
        help="run only this (repeatable; debugging: `make e2e` runs all)",
    )
    args = ap.parse_args()
    runs = [r for r in RUNS if not args.only or r[0] in args.only]
    t0 = time.monotonic()
    work = tempfile.mkdtemp(prefix="balance-e2e-")
    env = base_env(work)
    version = metadata.version("vllm-cpu")
    runner = Runner(work, env, version)
    header = (
        f"make e2e: vLLM {version} (vllm-cpu) through `vllm serve` (e2e/vllm_cli.py), tiny Qwen3-MoE (4 experts, "
        "top-2, bf16), DP=2, max_num_seqs=4, --skip-tokenizer-init, streaming /v1/completions on 127.0.0.1"
    )
    timings = []
    try:
        moe, dense = write_models(work, env)
        for key, name, balance in runs:
            t = time.monotonic()
            if name == "refusal":
                runner.refusal(dense)
            else:
                runner.topology(name, moe, balance)
            timings.append(f"{key} {time.monotonic() - t:.0f} s")
    except Failed as e:
        print(header)
        print("\n".join(runner.checks.summary))
        print(f"make e2e: FAILED: {e}")
        if e.log:
            print(f"--- last lines of {e.log}:\n{tail(e.log)}")
        print(f"work folder kept: {work}")
        print(f"e2e: {runner.passed} passed, 1 failed")
        return 1
    shims = ", ".join(sorted(runner.checks.shims)) or "none needed"
    print(f"{header}; test-only CPU shims: {shims}")
    print("\n".join(runner.checks.summary))
    print(f"make e2e: total wall {time.monotonic() - t0:.0f} s ({', '.join(timings)})")
    print(f"e2e: {runner.passed} passed, 0 failed")
    if args.keep:
        print(f"work folder: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
import re
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
from procs import (
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
STOP_TIMEOUT_S = 90.0  # SIGTERM to every session of a topology being empty
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
FREEZE_SLACK_TOKENS = 3  # see check_freeze
REFUSAL = "balance scheduling is enabled but vLLM runs its DP engine core only for"
REQUEST_TAG = re.compile(r"e2e-(?:long|short|load)-\d+")


def short(qualname: str) -> str:
    return qualname.rsplit(".", 1)[-1]


def is_balance_engine(qualname: str, expected: str) -> bool:
    return qualname.startswith("vllm_ascend.") and qualname.endswith(f".{expected}")


def is_balance_scheduler(mro: list[str]) -> bool:
    """A scheduler class of the runtime (whichever upstream scheduler it extends)."""
    return any(c.startswith("vllm_ascend.") for c in mro)


def read_probe(probe_dir: str) -> dict[str, Any]:
    out = {}
    for name in sorted(os.listdir(probe_dir)):
        if name.startswith("rank") and name.endswith(".json"):
            with open(os.path.join(probe_dir, name)) as f:
                out[name[: -len(".json")]] = json.load(f)
    return out


def admitted_on(probe: dict[str, Any]) -> dict[str, set[int]]:
    """Client request id -> the DP ranks whose scheduler admitted it (vLLM's id embeds X-Request-Id)."""
    where: dict[str, set[int]] = {}
    for p in probe.values():
        for rid in p["admitted"]:
            if m := REQUEST_TAG.search(rid):
                where.setdefault(m[0], set()).add(p["dp_rank"])
    return where


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
        self.summary: list[str] = []
        self.shims: set[str] = set()
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
        self.summary.append(
            f'topology "{name}", balance {"on" if balance else "off"}: {topo.description} (API servers: {api}); '
            f"ready {ready_s:.0f} s, shutdown {stop_s:.1f} s, no process left, wall {wall:.0f} s; "
            f"{sockets.seen} inet sockets, every connection 127.0.0.1 to 127.0.0.1{wildcard}"
            + (f"; Ray head on 127.0.0.1:{topo.ray_head_port}, stopped with it" if head else "")
        )
        problems = self.check_engine_cores(topo, probe, balance)
        problems += self.check_logs(topo, trees, probe, balance)
        problems += self.check_routing(probe, load is not None)
        problems += self.check_freeze(freeze, probe_freeze, balance)
        if load is not None:
            problems += self.check_load(load, probe_freeze, probe)
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

    # -- checks: each returns the problems it found ----------------------------------------------
    def check_engine_cores(self, topo: topologies.Topology, probe: dict[str, Any], balance: bool) -> list[str]:
        if sorted(probe) != ["rank0", "rank1"]:
            return [
                f"probe files for DP ranks 0 and 1 expected, got {sorted(probe)} (plugin not loaded in engine cores?)"
            ]
        problems = []
        for rank, p in sorted(probe.items()):
            self.shims.update(p["cpu_shims"])
            node = topo.node_of_rank(p["dp_rank"])
            self.summary.append(
                f"  {rank} ({node.name}): {short(p['engine_core_class'])} + {short(p['scheduler_class'])} "
                f"(balance_enabled={p['balance_enabled']}, cap {p['max_num_running_reqs']})"
            )
            if balance:
                if not is_balance_engine(p["engine_core_class"], topo.balance_engine):
                    problems.append(f"{rank}: engine core is {p['engine_core_class']}, expected {topo.balance_engine}")
                if not is_balance_scheduler(p["scheduler_mro"]) or p["balance_enabled"] is not True:
                    problems.append(
                        f"{rank}: scheduler {p['scheduler_class']} (balance_enabled={p['balance_enabled']}) "
                        "is not a balance scheduler with balance on"
                    )
                if not p["gathered"]:
                    problems.append(f"{rank}: no gather ever reached the scheduler (no leader count at schedule())")
                if p["admitted_while_leader_at_cap"]:
                    problems.append(
                        f"{rank}: admitted {p['admitted_while_leader_at_cap'][:4]} while the leader's gathered count "
                        "was at the cap: the freeze did not hold"
                    )
            else:
                if p["engine_core_class"] != topo.upstream_engine:
                    problems.append(
                        f"{rank}: engine core is {p['engine_core_class']}, expected upstream {topo.upstream_engine}"
                    )
                if p["balance_enabled"] or p["gathered"] or p["frozen_steps"]:
                    state = {k: p[k] for k in ("balance_enabled", "gathered", "frozen_steps")}
                    problems.append(f"{rank}: balance state with balance off: {state}")
        return problems

    def check_logs(
        self, topo: topologies.Topology, trees: list[Tree], probe: dict[str, Any], balance: bool
    ) -> list[str]:
        """Balance on: each node's own output has its ranks' start-up line, in vLLM's format."""
        problems = []
        for node, tree in zip(topo.nodes, trees, strict=True):
            found, stray = server_log.startup_lines(tree.log_text())
            if stray:
                problems.append(f"{node.name}: start-up line not in vLLM's format: {stray[0]!r}")
            if not balance:
                if found:
                    problems.append(f"{node.name}: balance start-up line with balance off: {found[min(found)].line!r}")
                continue
            for rank in node.ranks:
                line = found.get(rank)
                if line is None:
                    problems.append(
                        f"{node.name}: no 'balance scheduling active on DP rank {rank}: ...' line in its output "
                        "at vLLM's default log level"
                    )
                    continue
                # A rank without a probe file is check_engine_cores' finding; the line is still checked.
                seen = probe.get(f"rank{rank}")
                expected = short(seen["scheduler_class"]) if seen else line.scheduler
                if line.engine != topo.balance_engine or line.scheduler != expected:
                    problems.append(f"{node.name}: start-up line names other classes than the probe saw: {line.line!r}")
                if not server_log.path_matches(line.path, self.vllm_version):
                    problems.append(
                        f"{node.name}: start-up line names neither the seam nor a copy generated from vLLM "
                        f"v{self.vllm_version}: {line.line!r}"
                    )
                self.summary.append(f"  log, {node.name}: {line.line.split('] ', 1)[1]}")
            if extra := sorted(set(found) - set(node.ranks)):
                problems.append(f"{node.name}: start-up lines for DP ranks it does not run: {extra}")
        return problems

    def check_routing(self, probe: dict[str, Any], with_load: bool) -> list[str]:
        """Every client request was admitted exactly on the rank it was pinned to (or on some rank)."""
        where = admitted_on(probe)
        expected: dict[str, int | None] = {f"e2e-long-{i}": 1 for i in range(client.CAP)}
        expected.update({f"e2e-short-{i}": 0 for i in range(client.CAP)})
        if with_load:
            expected.update({rid: rank for rid, _, _, rank in client.load_specs()})
        problems = []
        for rid, rank in expected.items():
            ranks = where.get(rid, set())
            if not ranks or len(ranks) > 1 or (rank is not None and ranks != {rank}):
                want = f"rank {rank}" if rank is not None else "one rank"
                problems.append(f"{rid}: admitted on ranks {sorted(ranks)}, expected {want}")
        if problems:
            return [f"requests not where the client sent them ({len(problems)}): {problems[:4]}"]
        return []

    def check_freeze(self, freeze: dict[str, Any], probe: dict[str, Any], balance: bool) -> list[str]:
        longs, shorts = freeze["longs"], freeze["shorts"]
        first_long = min(longs, key=lambda s: s.last_token())
        # The gate opens in the engine step after the first long request's last token; a short
        # request's first token comes from that step at the earliest. The long's last tokens may
        # still be in flight in another server process (or the other server) when it arrives, so
        # the client compares with the long's token FREEZE_SLACK_TOKENS engine steps earlier. Without
        # the gate the short ones start ~40 tokens earlier (the negative control shows it); the
        # probe's admissions while the leader was at its cap are the exact check.
        gate_open = first_long.token_times[-1 - FREEZE_SLACK_TOKENS]
        early = [s.id for s in shorts if s.first_token() <= gate_open]
        t_ref = min(s.sent for s in longs)
        frozen = {rank: p["frozen_steps"] for rank, p in sorted(probe.items())}
        self.summary.append(
            "  freeze: 4 long on rank 1 (at cap), 4 short on rank 0 "
            f"sent at {min(s.sent for s in shorts) - t_ref:.2f} s: "
            f"first long done {first_long.last_token() - t_ref:.2f} s, "
            f"first short token {min(s.first_token() for s in shorts) - t_ref:.2f} s, shorts early {len(early)}/4, "
            f"frozen steps {' '.join(f'{r}={n}' for r, n in frozen.items())}, {freeze['wall_s']:.1f} s"
        )
        if balance:
            problems = []
            if early:
                problems.append(
                    f"freeze: short requests {early} on rank 0 streamed a token before the first long request on "
                    "rank 1 (at its cap) finished: the gate did not hold"
                )
            if not frozen.get("rank0", 0) > 0:
                problems.append(
                    "freeze: rank 0 never saw its admission gate closed by rank 1 at its cap (frozen steps 0)"
                )
            return problems
        # Balance off: upstream admits at once, the short requests are done before any long one.
        shorts_first = all(s.last_token() < first_long.last_token() for s in shorts)
        if len(early) != len(shorts) or not shorts_first:
            return [
                f"freeze (balance off): the balance-on check should fail for all 4 short requests, it did for "
                f"{len(early)} (all finished first: {shorts_first}): the check has no teeth"
            ]
        self.summary.append(
            "  negative control: the balance-on checks fail here as they must (4/4 short requests early, "
            f"rank0 frozen steps {frozen.get('rank0', 0)})"
        )
        return []

    def check_load(self, load: dict[str, Any], probe_before: dict[str, Any], probe: dict[str, Any]) -> list[str]:
        streams = load["streams"]
        where = admitted_on(probe)
        per_rank = {r: sum(1 for s in streams if where.get(s.id) == {r}) for r in (0, 1)}
        frozen = {
            rank: p["frozen_steps"] - probe_before.get(rank, {}).get("frozen_steps", 0)
            for rank, p in sorted(probe.items())
        }
        pinned = sum(1 for s in streams if s.rank is not None)
        self.summary.append(
            f"  load: {len(streams)} requests ({pinned} pinned), {sum(len(s.token_ids) for s in streams)} tokens, "
            f"each exactly its max_tokens; admitted rank0={per_rank[0]} rank1={per_rank[1]}, frozen steps "
            f"{' '.join(f'{r}={n}' for r, n in frozen.items())}, {load['wall_s']:.1f} s"
        )
        if len(streams) != client.LOAD_REQUESTS:
            return [f"load: {len(streams)} requests completed, expected {client.LOAD_REQUESTS}"]
        return []

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
        self.summary.append(
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
        print("\n".join(runner.summary))
        print(f"make e2e: FAILED: {e}")
        if e.log:
            print(f"--- last lines of {e.log}:\n{tail(e.log)}")
        print(f"work folder kept: {work}")
        print(f"e2e: {runner.passed} passed, 1 failed")
        return 1
    shims = ", ".join(sorted(runner.shims)) or "none needed"
    print(f"{header}; test-only CPU shims: {shims}")
    print("\n".join(runner.summary))
    print(f"make e2e: total wall {time.monotonic() - t0:.0f} s ({', '.join(timings)})")
    print(f"e2e: {runner.passed} passed, 0 failed")
    if args.keep:
        print(f"work folder: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

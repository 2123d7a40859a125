"""The ways ``make e2e`` launches ``vllm serve``: command lines, which process tree runs which DP rank,
and where a request for each rank goes. Every address flag is 127.0.0.1; ports are the OS's free ones.

vLLM's default API-server count is kept everywhere (what an operator gets): one per DP rank for the
internal LB of ``vllm serve`` and of the headless head node (``run_multi_api_server``: the engines are
launched by the parent, the API servers are separate processes), one for each external-LB server
(``run_server``: AsyncLLM in the API server process starts its engine core). Both paths are run.

- ``vllm serve``: one server, ``--data-parallel-size 2`` (internal LB).
- ``headless``: two "nodes". Node 0 serves HTTP and runs DP rank 0 (``--data-parallel-size-local 1``);
  node 1 is ``--headless --data-parallel-start-rank 1`` and reaches node 0 through the same
  ``--data-parallel-address`` / ``--data-parallel-rpc-port`` a second machine would be given. Node 0's
  API servers route over both ranks (the rank header reaches node 1's engine).
- ``external LB``: one server per rank (``--data-parallel-rank 0`` / ``1``), each on its own port; the
  client is the load balancer (the port picks the rank).
- ``Ray``: one server, ``--data-parallel-backend ray``: the engine cores are Ray actors
  (``DPMoEEngineCoreActor``, with balance ``BalanceDPMoEEngineCoreActor``) placed by vLLM's
  ``CoreEngineActorManager`` on a Ray head started beside it (``ray start --head --block``, its own
  process tree) and reached through ``RAY_ADDRESS``. The actors' own workers use the mp executor: Ray
  workers need a platform with a Ray device, which the CPU build is not (the probe names the one key the
  front end needs). Everything Ray binds or dials is pinned to 127.0.0.1 (``ray_env``).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from dataclasses import dataclass

from client import CAP, MODEL_NAME, Route

HERE = os.path.dirname(os.path.abspath(__file__))
VLLM_CLI = os.path.join(HERE, "vllm_cli.py")


def balance_config(balance: bool) -> str:
    return json.dumps({"scheduler_config": {"enable_balance_scheduling": balance}})


def serve_args(model: str, balance: bool | None, max_num_seqs: int = CAP, dp: int = 2) -> list[str]:
    """What every process tree of every topology gets: the model, the engine shape, balance on/off.

    ``balance=None``: no ``--additional-config`` at all (an operator who forgot it on one node);
    ``max_num_seqs``: another running cap for one node (the fault runs' mismatch)."""
    config = [] if balance is None else ["--additional-config", balance_config(balance)]
    return [
        sys.executable,
        VLLM_CLI,
        "serve",
        model,
        "--served-model-name",
        MODEL_NAME,
        # No tokenizer: prompts are token ids and every streamed chunk carries its token ids
        # (return_token_ids), so counting needs none, and a random model's text means nothing.
        "--skip-tokenizer-init",
        "--dtype",
        "bfloat16",
        "--max-num-seqs",
        str(max_num_seqs),
        "--max-model-len",
        "256",
        "--max-num-batched-tokens",
        "256",  # shorter warm-up on CPU than vLLM's default
        "--enforce-eager",
        "--seed",
        "0",
        "--data-parallel-size",
        str(dp),
        "--data-parallel-address",
        "127.0.0.1",
        *config,
    ]


@dataclass(frozen=True)
class Node:
    """One process tree: a name for the summary, its extra flags, the DP ranks it runs, its port."""

    name: str
    flags: tuple[str, ...]
    ranks: tuple[int, ...]
    port: int | None  # None: headless, no HTTP


@dataclass(frozen=True)
class Topology:
    name: str
    description: str
    nodes: tuple[Node, ...]
    route: Route
    # The engine-core class each rank runs with balance on (upstream's without).
    balance_engine: str = "BalanceDPEngineCoreProc"
    upstream_engine: str = "vllm.v1.engine.core.DPEngineCoreProc"
    ray_head_port: int | None = None  # a Ray head to start first, on 127.0.0.1:<port>

    def health_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{n.port}/health" for n in self.nodes if n.port is not None]

    def node_of_rank(self, rank: int) -> Node:
        return next(n for n in self.nodes if rank in n.ranks)


def build(name: str, ports: list[int], dp: int = 2) -> Topology:
    """``ports``: three free ports (HTTP for up to two servers, the DP RPC port). ``dp``: the DP size
    (``make e2e``: 2; the serving benchmark also 4: internal LB one server, headless two nodes of dp/2)."""
    http0, http1, rpc = ports[0], ports[1], ports[2]
    if dp != 2 and name not in ("vllm serve", "headless"):
        raise ValueError(f"{name}: DP 2 only")
    host = ("--host", "127.0.0.1")
    rpc_flags = ("--data-parallel-rpc-port", str(rpc))
    if name == "vllm serve":
        return Topology(
            name,
            "one server, --data-parallel-size 2",
            (Node("server", (*host, "--port", str(http0)), tuple(range(dp)), http0),),
            Route((f"http://127.0.0.1:{http0}",), rank_header=True),
        )
    if name == "headless":
        half = dp // 2
        local = ("--data-parallel-size-local", str(half), *rpc_flags)
        return Topology(
            name,
            f"node 0: server, --data-parallel-size-local {half}; node 1: --headless --data-parallel-start-rank {half}",
            (
                Node("node 0 (server)", (*host, "--port", str(http0), *local), tuple(range(half)), http0),
                Node(
                    "node 1 (headless)",
                    ("--headless", *local, "--data-parallel-start-rank", str(half)),
                    tuple(range(half, dp)),
                    None,
                ),
            ),
            Route((f"http://127.0.0.1:{http0}",), rank_header=True),
        )
    if name == "external LB":
        return Topology(
            name,
            "two servers, --data-parallel-rank 0 and 1, one port each",
            (
                Node(
                    "rank 0 server", (*host, "--port", str(http0), "--data-parallel-rank", "0", *rpc_flags), (0,), http0
                ),
                Node(
                    "rank 1 server", (*host, "--port", str(http1), "--data-parallel-rank", "1", *rpc_flags), (1,), http1
                ),
            ),
            Route((f"http://127.0.0.1:{http0}", f"http://127.0.0.1:{http1}"), rank_header=False),
        )
    if name == "Ray":
        ray_flags = ("--data-parallel-backend", "ray", "--distributed-executor-backend", "mp")
        return Topology(
            name,
            "one server, --data-parallel-size 2 --data-parallel-backend ray, a Ray head on 127.0.0.1",
            (Node("server", (*host, "--port", str(http0), *ray_flags), (0, 1), http0),),
            Route((f"http://127.0.0.1:{http0}",), rank_header=True),
            balance_engine="BalanceDPMoEEngineCoreActor",
            upstream_engine="vllm.v1.engine.core.DPMoEEngineCoreActor",
            ray_head_port=rpc,
        )
    raise ValueError(f"unknown topology {name!r}")


def ray_head_args(port: int, temp_dir: str) -> list[str]:
    """A Ray head that stays in the foreground (``--block``): SIGTERM to it takes Ray down."""
    return [
        os.path.join(os.path.dirname(sys.executable), "ray"),
        "start",
        "--head",
        "--block",
        "--node-ip-address",
        "127.0.0.1",
        "--port",
        str(port),
        # Each DP rank's placement group takes a device bundle and a control bundle of 1 CPU each.
        "--num-cpus",
        "4",
        "--num-gpus",
        "0",
        "--include-dashboard=false",
        "--disable-usage-stats",
        "--object-store-memory",
        str(256 * 1024 * 1024),
        "--temp-dir",
        temp_dir,
    ]


def ray_env(env: dict[str, str], work: str, port: int) -> dict[str, str]:
    """Ray 2.60 on loopback only, with nothing phoning home (each line was seen to matter, with strace)."""
    home = os.path.join(work, "ray-home")
    os.makedirs(home, exist_ok=True)
    # Its presence stops the head's usage-stats probe of the cloud metadata address.
    with open(os.path.join(home, "ray_bootstrap_config.yaml"), "w") as f:
        f.write("{}\n")
    return dict(
        env,
        # Without it Ray turns 127.0.0.1 into the host's routable address (for --node-ip-address too).
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
        RAY_USAGE_STATS_ENABLED="0",
        RAY_USAGE_STATS_REPORT_URL="http://127.0.0.1:9/",  # a closed loopback port: no usage report leaves
        HOME=home,  # also where the head keeps its auth token
        # A local `ray start` turns token auth on; a client given an address sends the token only so.
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=secrets.token_hex(32),  # this run's own, for the head and every client
        RAY_ADDRESS=f"127.0.0.1:{port}",  # what vLLM's own ray.init() connects to
        RAY_TMPDIR=os.path.join(work, "ray-tmp"),
        BALANCE_E2E_RAY_DEVICE_KEY="CPU",
    )

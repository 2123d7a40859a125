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
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

from client import CAP, MODEL_NAME, Route

HERE = os.path.dirname(os.path.abspath(__file__))
VLLM_CLI = os.path.join(HERE, "vllm_cli.py")


def balance_config(balance: bool) -> str:
    return json.dumps({"scheduler_config": {"enable_balance_scheduling": balance}})


def serve_args(model: str, balance: bool) -> list[str]:
    """What every process tree of every topology gets: the model, the engine shape, balance on/off."""
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
        str(CAP),
        "--max-model-len",
        "256",
        "--max-num-batched-tokens",
        "256",  # shorter warm-up on CPU than vLLM's default
        "--enforce-eager",
        "--seed",
        "0",
        "--data-parallel-size",
        "2",
        "--data-parallel-address",
        "127.0.0.1",
        "--additional-config",
        balance_config(balance),
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

    def health_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{n.port}/health" for n in self.nodes if n.port is not None]

    def node_of_rank(self, rank: int) -> Node:
        return next(n for n in self.nodes if rank in n.ranks)


def build(name: str, ports: list[int]) -> Topology:
    """``ports``: four free ports (HTTP for up to two servers, the DP RPC port, one spare)."""
    http0, http1, rpc = ports[0], ports[1], ports[2]
    host = ("--host", "127.0.0.1")
    rpc_flags = ("--data-parallel-rpc-port", str(rpc))
    if name == "vllm serve":
        return Topology(
            name,
            "one server, --data-parallel-size 2",
            (Node("server", (*host, "--port", str(http0)), (0, 1), http0),),
            Route((f"http://127.0.0.1:{http0}",), rank_header=True),
        )
    if name == "headless":
        local = ("--data-parallel-size-local", "1", *rpc_flags)
        return Topology(
            name,
            "node 0: server, --data-parallel-size-local 1; node 1: --headless --data-parallel-start-rank 1",
            (
                Node("node 0 (server)", (*host, "--port", str(http0), *local), (0,), http0),
                Node("node 1 (headless)", ("--headless", *local, "--data-parallel-start-rank", "1"), (1,), None),
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
    raise ValueError(f"unknown topology {name!r}")


NAMES = ("vllm serve", "headless", "external LB")

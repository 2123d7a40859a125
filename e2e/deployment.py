"""One ``vllm serve`` deployment of the fault runs: its process trees, its probe, its HTTP endpoints.

``make e2e`` (``run.py``) starts, checks and stops a topology in one go; the fault runs keep one start
for several scenarios, kill parts of it on purpose, and talk to vLLM's dev endpoints. This is that
start: the trees of ``topologies.build`` (each in its own session, ``procs.Tree``), one probe folder,
and, per node, its own balance setting and running cap where a run asks for them (the mismatch runs).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import topologies
from procs import Failed, Tree, free_ports, session_pids, stop, wait_api_servers, wait_healthy

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


@dataclass(frozen=True)
class NodeSetting:
    """One node's own flags: balance on/off/absent (None: no --additional-config) and its running cap."""

    balance: bool | None
    max_num_seqs: int


def read_probe(probe_dir: str) -> dict[str, Any]:
    """``rank<N>.json`` of every engine core that wrote one (a file being replaced is read next time)."""
    out = {}
    for name in sorted(os.listdir(probe_dir)):
        if name.startswith("rank") and name.endswith(".json"):
            try:
                with open(os.path.join(probe_dir, name)) as f:
                    out[name[: -len(".json")]] = json.load(f)
            except (OSError, json.JSONDecodeError):
                continue
    return out


@dataclass
class Deployment:
    name: str
    slug: str
    topo: topologies.Topology
    trees: list[Tree]
    probe_dir: str
    settings: list[NodeSetting]
    t_start: float = 0.0
    ready_s: float = 0.0
    api_servers: dict[str, int] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        work: str,
        env: dict[str, str],
        model: str,
        name: str,
        settings: list[NodeSetting],
        slug: str,
        extra_flags: list[list[str]] | None = None,
        dp: int = 2,
    ) -> Deployment:
        topo = topologies.build(name, free_ports(3), dp)
        if len(settings) != len(topo.nodes):
            raise ValueError(f"{name}: {len(topo.nodes)} nodes, {len(settings)} settings")
        probe_dir = os.path.join(work, f"probe-{slug}")
        os.makedirs(probe_dir)
        env = dict(env, BALANCE_E2E_PROBE_DIR=probe_dir)
        extra = extra_flags or [[] for _ in topo.nodes]
        trees = [
            Tree(
                f'"{name}" {node.name}',
                topologies.serve_args(model, s.balance, s.max_num_seqs, dp) + list(node.flags) + extra[i],
                os.path.join(work, f"{slug}-{i}.log"),
                env,
                ROOT,
            )
            for i, (node, s) in enumerate(zip(topo.nodes, settings, strict=True))
        ]
        return cls(name, slug, topo, trees, probe_dir, settings)

    @property
    def url(self) -> str:
        return self.topo.route.urls[0]

    def start(self) -> None:
        self.t_start = time.monotonic()
        for tree in self.trees:
            tree.start()

    def wait_ready(self, timeout: float) -> float:
        deadline = self.t_start + timeout
        for url in self.topo.health_urls():
            wait_healthy(url, self.trees, deadline)
        self.api_servers = {
            node.name: wait_api_servers(tree, self.trees, deadline)
            for node, tree in zip(self.topo.nodes, self.trees, strict=True)
            if node.port is not None
        }
        self.ready_s = time.monotonic() - self.t_start
        return self.ready_s

    def probe(self) -> dict[str, Any]:
        return read_probe(self.probe_dir)

    def alive(self) -> dict[str, dict[int, str]]:
        """Tree name -> its live processes (pid -> name)."""
        return {tree.name: session_pids(tree.sid) for tree in self.trees if tree.proc is not None}

    def all_gone(self) -> bool:
        for tree in self.trees:
            if tree.proc is not None:
                tree.proc.poll()
        return not any(self.alive().values())

    def stop(self, timeout: float) -> float:
        return stop([t for t in self.trees if t.proc is not None], timeout)

    def kill(self) -> None:
        for tree in self.trees:
            tree.kill()

    def log_of(self, rank: int) -> str:
        return self.trees[self.topo.nodes.index(self.topo.node_of_rank(rank))].log_path

    # -- HTTP: vLLM's dev endpoints (VLLM_SERVER_DEV_MODE=1) -------------------------------------
    def post(self, path: str, timeout: float = 120.0) -> tuple[int, str]:
        return http("POST", f"{self.url}{path}", timeout)

    def get(self, path: str, timeout: float = 30.0) -> tuple[int, str]:
        return http("GET", f"{self.url}{path}", timeout)


def http(method: str, url: str, timeout: float) -> tuple[int, str]:
    """(status, body); a connection that fails is status 0 with the error as the body."""
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return int(e.code), e.read().decode(errors="replace")
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        return 0, f"{type(e).__name__}: {e}"


def require(ok: bool, message: str, log: str | None = None) -> None:
    if not ok:
        raise Failed(message, log)

"""``make e2e``'s checks of what ran: each engine core's classes and balance state (the probe), each node's
start-up line (its own output), every request on the rank it was sent to, the freeze and the load.

``Checks`` collects the lines of the report as it checks; each ``check_*`` returns the problems it found.
``make e2e-faults`` and the soak run the engine-core and log checks on their own deployments too.
"""

from __future__ import annotations

import re
from typing import Any

import client
import server_log
import topologies
from procs import Tree

FREEZE_SLACK_TOKENS = 3  # see check_freeze
REQUEST_TAG = re.compile(r"e2e-(?:long|short|load)-\d+")


def short(qualname: str) -> str:
    return qualname.rsplit(".", 1)[-1]


def is_balance_engine(qualname: str, expected: str) -> bool:
    return qualname.startswith("vllm_ascend.") and qualname.endswith(f".{expected}")


def is_balance_scheduler(mro: list[str]) -> bool:
    """A scheduler class of the runtime (whichever upstream scheduler it extends)."""
    return any(c.startswith("vllm_ascend.") for c in mro)


def admitted_on(probe: dict[str, Any]) -> dict[str, set[int]]:
    """Client request id -> the DP ranks whose scheduler admitted it (vLLM's id embeds X-Request-Id)."""
    where: dict[str, set[int]] = {}
    for p in probe.values():
        for rid in p["admitted"]:
            if m := REQUEST_TAG.search(rid):
                where.setdefault(m[0], set()).add(p["dp_rank"])
    return where


class Checks:
    def __init__(self, vllm_version: str) -> None:
        self.vllm_version = vllm_version
        self.summary: list[str] = []
        self.shims: set[str] = set()

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

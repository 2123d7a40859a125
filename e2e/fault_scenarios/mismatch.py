"""Ranks whose settings differ (balance on and off, or two caps): every node logs the runtime's refusal and
every process of both trees exits within ``MISMATCH_BOUND_S`` of the DP group forming."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from typing import Any

import client
import server_log
from deployment import Deployment, http
from procs import session_pids

from fault_scenarios.outcomes import Result
from fault_scenarios.plan import START_TIMEOUT_S, Run
from fault_scenarios.watch import leftovers

MISMATCH_BOUND_S = 90.0  # deliverable 1: the whole deployment gone this long after the DP group formed
MISMATCH = "balance scheduling differs across the DP group"
# vLLM titles the engine core process (run_engine_core) right before building DPEngineCoreProc, whose first
# act is forming the DP group: once both trees have one, the group forms. The mismatch runs time the exit
# from there (an upper bound on the time since the group formed).
ENGINE_CORE_COMM = "VLLM::EngineCor"


def mismatch(r: Run, d: Deployment) -> Result:
    desc = {
        "mismatch balance": "node 0 balance on, node 1 no --additional-config (off)",
        "mismatch cap": f"balance on on both, node 0 --max-num-seqs {r.settings[0].max_num_seqs}, node 1 "
        f"{r.settings[1].max_num_seqs}",
    }[r.key]
    d.start()
    titled: dict[str, float] = {}  # tree -> when its engine core process first carried its title
    t_dp: float | None = None
    t_refusal: float | None = None
    healthy_at: float | None = None
    request: dict[str, Any] = {}
    deadline = d.t_start + START_TIMEOUT_S
    while time.monotonic() < deadline:
        now = time.monotonic()
        for tree in d.trees:
            if tree.name not in titled and any(n.startswith(ENGINE_CORE_COMM) for n in session_pids(tree.sid).values()):
                titled[tree.name] = now
        if t_dp is None and len(titled) == len(d.trees):
            t_dp = max(titled.values())
            deadline = t_dp + MISMATCH_BOUND_S
        if t_refusal is None and any(server_log.error_lines(tree.log_text(), MISMATCH) for tree in d.trees):
            t_refusal = now
            if t_dp is None:  # an engine core came and went between two polls: the refusal marks it
                t_dp = now
                deadline = t_dp + MISMATCH_BOUND_S
        if d.all_gone():
            break
        if healthy_at is None and t_dp is not None and http("GET", f"{d.url}/health", 2)[0] == 200:
            healthy_at = time.monotonic()
            # What an operator would do next: one request, pinned to rank 0 (the hang).
            threading.Thread(target=one_request, args=(d, request, deadline), daemon=True).start()
        time.sleep(0.25)
    gone = d.all_gone()
    now = time.monotonic()
    left = leftovers(d)
    d.kill()
    lines = {
        node.name: server_log.error_lines(tree.log_text(), MISMATCH)
        for node, tree in zip(d.topo.nodes, d.trees, strict=True)
    }
    problems = []
    if t_dp is None:
        problems.append("no engine core process seen, and no refusal")
    since_dp = now - t_dp if t_dp is not None else float("nan")
    if not gone:
        state = f"ready {healthy_at - d.t_start:.0f} s" if healthy_at is not None else "never healthy"
        req = request.get("result", "no request sent")
        problems.append(
            f"still running {since_dp:.0f} s after the DP group formed ({state}; one request pinned to rank 0: "
            f"{req}): {left}"
        )
    for node, found in lines.items():
        if not found:
            problems.append(f"{node}: no ERROR line '{MISMATCH} ...' in vLLM's format")
        elif not names_ranks_and_values(found[0], r):
            problems.append(f"{node}: the refusal names neither both ranks nor the values: {found[0]!r}")
    refused = f", the refusal logged {t_refusal - t_dp:.1f} s after" if t_refusal is not None and t_dp else ""
    text = f"{desc}: " + (
        f"every process gone {since_dp:.1f} s after both engine cores started{refused} "
        f"({now - d.t_start:.0f} s after the start)"
        if gone
        else f"not gone {since_dp:.0f} s after both engine cores started{refused}"
    )
    for node, found in lines.items():
        if found:
            text += f"; {node}: {found[0].split('] ', 1)[-1]}"
    res = Result(r.key, "settings differ across the DP group", text, now - d.t_start, problems)
    res.extra = {
        "since_dp_s": since_dp,
        "gone": gone,
        "refusal_s": (t_refusal - t_dp) if t_refusal and t_dp else None,
    }
    return res


def one_request(d: Deployment, into: dict[str, Any], deadline: float) -> None:
    body = json.dumps(
        {"model": client.MODEL_NAME, "prompt": client.prompt(8, 1), "max_tokens": 4, "ignore_eos": True}
    ).encode()
    req = urllib.request.Request(
        f"{d.url}/v1/completions",
        data=body,
        headers={"Content-Type": "application/json", "X-data-parallel-rank": "0", "X-Request-Id": "e2e-mismatch-0"},
    )
    t = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=max(1.0, deadline - t)) as resp:
            into["result"] = f"HTTP {resp.status} after {time.monotonic() - t:.1f} s"
    except Exception as e:  # the answer (or its absence) is the finding
        into["result"] = f"{type(e).__name__} after {time.monotonic() - t:.1f} s: {str(e)[:120]}"


def names_ranks_and_values(line: str, r: Run) -> bool:
    """The refusal names both DP ranks and the values that differ (the caps, or balance on and off)."""
    message = line.split("] ", 1)[-1]
    if not (re.search(r"\b0\b", message) and re.search(r"\b1\b", message)):
        return False
    if r.key == "mismatch cap":
        return bool(re.search(rf"\b{r.settings[0].max_num_seqs}\b", message)) and bool(
            re.search(rf"\b{r.settings[1].max_num_seqs}\b", message)
        )
    lower = message.lower()
    return bool(re.search(r"\b(on|true|enabled)\b", lower)) and bool(
        re.search(r"\b(off|false|disabled|absent|unset|missing|not set)\b", lower)
    )

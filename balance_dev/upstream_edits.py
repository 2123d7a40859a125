"""Released upstream files as a later vLLM might change them: real bytes with one anchor taken away."""

from __future__ import annotations

import re

# The WAITING loop's running-cap check, in each form vLLM has released (`len(self.running) == ...`
# up to 0.24, `num_running >= ...` after): what delta 2 anchors on.
_CAP_BREAK = re.compile(rb"\n +if (len\(self\.running\)|num_running) (==|>=) self\.max_num_\w+:\n +break\n")
# From 0.34 the check is a disjunct of the flag admission is guarded by (`loads_only = (num_running >=
# self.max_num_active_reqs or token_budget <= 0)`): taking the disjunct away leaves the budget's stop only.
_CAP_DISJUNCT = re.compile(rb"(\n +\w+ = \(\s*)num_running >= self\.max_num_\w+ or ")


def without_cap_check(scheduler_py: bytes) -> bytes:
    """``scheduler_py`` whose WAITING loop lost upstream's running-cap check: delta 2 has no anchor."""
    breaks, disjuncts = _CAP_BREAK.findall(scheduler_py), _CAP_DISJUNCT.findall(scheduler_py)
    if len(breaks) + len(disjuncts) != 1:
        found = len(breaks) + len(disjuncts)
        raise ValueError(f"expected one running-cap check in the WAITING loop, found {found}")
    if breaks:
        return _CAP_BREAK.sub(b"\n", scheduler_py, count=1)
    return _CAP_DISJUNCT.sub(rb"\1", scheduler_py, count=1)


# The first edit of the shipped recompute spec anchors here (generator/tree/layouts/vllm-ascend.toml); no
# balance delta does. Every release from v0.13.0 on has the statement once.
SPEC_ANCHOR = b"preempted_reqs: list[Request] = []"


def without_spec_anchor(scheduler_py: bytes) -> bytes:
    """``scheduler_py`` where a shipped spec's anchor statement says the same another way: the balance
    deltas still apply, that spec's edit does not (a main that breaks only a shipped spec)."""
    if scheduler_py.count(SPEC_ANCHOR) != 1:
        raise ValueError(f"expected {SPEC_ANCHOR.decode()!r} once in the file, found {scheduler_py.count(SPEC_ANCHOR)}")
    return scheduler_py.replace(SPEC_ANCHOR, b"preempted_reqs: list[Request] = list()")

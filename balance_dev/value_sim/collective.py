"""What balance's per-step gather costs a DP group: network rounds x link latency + CPU per call.

With balance on, every engine step runs one gather on the DP group right after vLLM's own sync, and
no rank starts its next step before it returns. On a multi-node group its time is

    rounds(N) x link latency + the CPU a rank spends in the call,

where ``rounds(N)`` counts the one-way network delays the call waits for one after the other. Both
parts were measured by ``make bench-net`` (N real gloo ranks in private network namespaces, packets
held for a set delay; ``benchmarks/results/net_collective.md``): rounds as the extra time per unit of
delay, CPU as the process time a rank spends per call with no delay. Each is a straight line in the
collective's own scale of N, fitted to the measurements at N = 2..64 and extrapolated beyond:

- ``all_gather`` of N one-element tensors, then max (``balance_gather()`` before ``group_max``):
  gloo's ring, about 2(N-1) delays, its CPU linear in N (about 75 us per rank of the group);
- ``all_reduce(MAX)``: gloo's ring too (reduce-scatter, then all-gather), about 2(N-1) delays, but
  with little CPU per message;
- ``group_max`` over gloo's point-to-point messages (``balance_gather()`` before): at most
  ceil(log2 N) + 1 delays (fewer were measured when the ranks call it at slightly different times, as
  they do after a barrier or vLLM's sync), CPU linear in ceil(log2 N) (90-200 us per exchange round
  on this machine);
- ``group_max_tcp``, the same exchange over its own TCP connections (``balance_gather()`` now):
  ceil(log2 N) delays (no receive announcement), about 50 us of CPU per round here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vllm_ascend.core.group_max import network_delays
from vllm_ascend.core.group_max import rounds as exchange_rounds

GATHERS = ("group_max_tcp", "group_max", "all_gather", "all_reduce", "none")
DEFAULT_LINK_US = 50.0


@dataclass(frozen=True)
class Line:
    """``fixed + slope * x``."""

    fixed: float
    slope: float

    def at(self, x: float) -> float:
        return self.fixed + self.slope * x


def fit(xs: Sequence[float], ys: Sequence[float]) -> Line:
    """Least-squares line through the points."""
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError("a line needs two distinct x values")
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return Line(my - slope * mx, slope)


def _linear(n: int) -> float:
    return float(n)


def _log(n: int) -> float:
    return float(exchange_rounds(n))  # ceil(log2 N)


@dataclass(frozen=True)
class GatherModel:
    """One way of finding the leader's count: its theory, and lines fitted to ``make bench-net``."""

    name: str
    theory: Callable[[int], int]  # sequential one-way delays, from the algorithm
    theory_text: str
    scale: Callable[[int], float]  # the x of both lines
    scale_text: str
    rounds: Line  # measured sequential one-way delays
    cpu_us: Line  # measured CPU per rank per call, no delay
    # What the same call costs more inside a real engine core (`make bench-serve`: the gather's thread CPU
    # per step, each rank on a core of its own, minus make bench-net's figure at that group size): the
    # wake-up of a thread that slept in the receive, beside its worker and the API servers.
    in_server_us: float = 0.0

    def rounds_at(self, n: int) -> float:
        return max(0.0, self.rounds.at(self.scale(n))) if n > 1 else 0.0

    def cpu_us_at(self, n: int) -> float:
        return max(0.0, self.cpu_us.at(self.scale(n))) if n > 1 else 0.0

    def step_ms(self, n: int, link_us: float) -> float:
        """What one call adds to every step of a group of ``n`` ranks whose links have this latency."""
        if n <= 1:
            return 0.0
        return (self.rounds_at(n) * link_us + self.cpu_us_at(n) + self.in_server_us) / 1000.0


# Fitted to benchmarks/results/net_collective.json (`make bench-net`: 2 cores, torch 2.13 CPU, N = 2..64; rounds
# from the 1 -> 10 ms slope, CPU at 0 ms), every line from the latest run, the one that added group_max_tcp
# (its CPU figures ran higher than the run before at every collective: 1.5-2x from N=16 on, so the
# comparison is within the run), except all_gather's rounds: the first run's fit (the latest run's slope
# fits large N only, 5.7 rounds at N=2 where 2 were measured). tests/value_sim/test_collective.py checks
# that these lines still reproduce that file; after a new run, copy the fits from net_collective.md here
# and rerun `make value-sim`.
MODELS: dict[str, GatherModel] = {
    "all_gather": GatherModel(
        "all_gather", lambda n: 2 * (n - 1), "2(N-1)", _linear, "N", Line(-0.155, 1.79), Line(-77.6, 113.0)
    ),
    "all_reduce": GatherModel(
        "all_reduce", lambda n: 2 * (n - 1), "2(N-1)", _linear, "N", Line(-1.56, 2.05), Line(234.0, 4.91)
    ),
    "group_max": GatherModel(
        "group_max",
        network_delays,
        "ceil(log2 N)+1",
        _log,
        "ceil(log2 N)",
        Line(1.93, 0.624),
        # CPU: the previous run's line, which this run matches at N <= 8 (109 / 169 / 260 us); from N=16 on
        # this run's gloo figures ran 2x the previous run's, no straight line in ceil(log2 N) through both.
        Line(-7.76, 91.2),
        in_server_us=111.0,  # bench-serve (gloo, 47306eb), internal LB pinned: 194 us per step; the line at N=2: 83
    ),
    # The same exchange over its own TCP connections (what balance_gather() runs now): no receive
    # announcement to wait for, so ceil(log2 N) delays, and one send and one receive per round in the
    # calling thread.
    "group_max_tcp": GatherModel(
        "group_max_tcp",
        exchange_rounds,
        "ceil(log2 N)",
        _log,
        "ceil(log2 N)",
        Line(0.467, 0.808),
        Line(-39.2, 50.0),
        in_server_us=83.0,  # bench-serve, internal LB pinned: 94 us per step (91 headless); the line at N=2: 11
    ),
}


def gather_step_ms(gather: str, n: int, link_us: float) -> float:
    """Per-step cost of ``gather`` (one of GATHERS; ``none`` is free) for ``n`` ranks."""
    if gather not in GATHERS:
        raise ValueError(f"gather must be one of {GATHERS}")
    if link_us < 0 or math.isnan(link_us):
        raise ValueError(f"a link latency is at least 0 us, got {link_us}")
    return 0.0 if gather == "none" else MODELS[gather].step_ms(n, link_us)

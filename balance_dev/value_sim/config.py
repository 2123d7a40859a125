"""One simulation's settings (``SimConfig``): the group, the arrivals and their load, routing, balance mode and
gather, the cost model and the lengths; refused here when they do not fit together."""

from __future__ import annotations

from dataclasses import dataclass, field

from balance_dev.value_sim.collective import DEFAULT_LINK_US, gather_step_ms
from balance_dev.value_sim.cost import CostModel
from balance_dev.value_sim.workload import Lengths

BALANCE_MODES = ("off", "on", "throttle", "on+throttle")
ARRIVALS = ("closed", "poisson", "bursty", "trace")


@dataclass(frozen=True)
class SimConfig:
    dp: int = 8
    arrivals: str = "poisson"
    load: float = 1.0  # open: x capacity_req_s; closed: x (dp * cap) requests in the system
    routing: str = "score"
    staleness_ms: float = 100.0  # vLLM's default min_stats_update_interval_ms
    balance: str = "off"
    gather: str = "group_max_tcp"  # how the balance modes find the leader's count (collective.GATHERS)
    link_us: float = DEFAULT_LINK_US  # one-way network latency between DP ranks, paid per round of the gather
    seconds: float = 60.0
    seed: int = 1
    cap: int = 16  # max_num_seqs per rank
    token_budget: int = 2048  # max_num_batched_tokens per rank
    prefill_interval: int = 4  # prefill_schedule_interval for the throttle modes
    burst_mean: float = 8.0
    think_s: float = 0.0  # closed loop: delay before a finished client sends its next request
    warmup_frac: float = 0.2
    capacity_req_s: float | None = None  # balance-off saturated capacity, requests/s (open arrivals)
    trace: str | None = None
    cost: CostModel = field(default_factory=CostModel)
    lengths: Lengths = field(default_factory=Lengths)

    def __post_init__(self) -> None:
        if self.balance not in BALANCE_MODES:
            raise ValueError(f"balance must be one of {BALANCE_MODES}")
        if self.arrivals not in ARRIVALS:
            raise ValueError(f"arrivals must be one of {ARRIVALS}")
        if self.arrivals == "trace" and not self.trace:
            raise ValueError("arrivals=trace needs a trace file")
        gather_step_ms(self.gather, self.dp, self.link_us)  # refuses an unknown gather or a negative link

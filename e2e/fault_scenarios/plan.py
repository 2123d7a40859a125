"""The table of ``make e2e-faults``' runs, as data: each run's topology and node settings, the request lengths
per topology, and the timeouts every family shares (``faults.py`` runs them; docs/e2e.md "Under faults")."""

from __future__ import annotations

from dataclasses import dataclass

import client
from client import CAP
from deployment import NodeSetting

START_TIMEOUT_S = 600.0
SCENARIO_TIMEOUT_S = 180.0
HTTP_TIMEOUT_S = 120.0  # one dev-endpoint call (pause with mode=wait returns once the running drained)
PAUSE_HOLD_S = 1.0  # how long a pause (or sleep) is held before resume
PAUSE_GRACE_S = 0.5  # tokens already on their way when /pause returned may still arrive this long after
GATE_SLACK_S = 0.1


@dataclass(frozen=True)
class Lengths:
    """Request lengths for one topology. The long requests hold rank 1 at its cap while the short ones
    reach rank 0 and a pause lands; the short ones of a pause scenario are still streaming then, balance
    off too. Headless engine steps cost about 5x the CPU on these 2 cores (the two engine cores, also in
    ``make e2e``'s timings, balance on and off alike), so its requests are half as long: the same
    margins in time, half the wall."""

    long: int  # the first long request's max_tokens (+4 per further one)
    pause_short: int
    load_divisor: int  # the 64-request load's max_tokens divided by this (at least 1 each)


LENGTHS = {"vllm serve": Lengths(client.LONG_TOKENS, 32, 1), "headless": Lengths(24, 16, 2)}

ON = NodeSetting(True, CAP)
OFF = NodeSetting(False, CAP)


@dataclass(frozen=True)
class Run:
    key: str
    topology: str
    settings: tuple[NodeSetting, ...]
    kind: str  # "faults" or "mismatch"

    @property
    def balance(self) -> bool:
        return bool(self.settings[0].balance)

    @property
    def control_of(self) -> str | None:
        """The balance-on run this one is the balance-off control of."""
        return {"serve off": "serve on", "headless off": "headless on"}.get(self.key)


RUNS = [
    Run("serve on", "vllm serve", (ON,), "faults"),
    Run("serve off", "vllm serve", (OFF,), "faults"),
    Run("headless on", "headless", (ON, ON), "faults"),
    Run("headless off", "headless", (OFF, OFF), "faults"),
    Run("mismatch balance", "headless", (ON, NodeSetting(None, CAP)), "mismatch"),
    Run("mismatch cap", "headless", (ON, NodeSetting(True, 2 * CAP)), "mismatch"),
]


def specs64() -> list[tuple[str, int, int, int | None]]:
    """make e2e's 64-request load: mixed prompt and output lengths, 24 pinned."""
    return client.load_specs()

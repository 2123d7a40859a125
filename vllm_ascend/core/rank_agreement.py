"""The DP group agrees on balance at start-up, or refuses: every rank on with one cap and one copy, or every rank off.

A per-step gather called on some ranks only is the deadlock the seed warns about, and a node started
without ``--additional-config`` reaches it silently. Ranks with different running caps never hang, but
"the leader is at its cap" then means nothing on the others. So every DP engine core, balance on or off,
announces its settings once, right after upstream forms the DP group, in that group's own TCP store
(upstream keeps it as ``dp_store``), and reads the others': key writes and reads, not a collective, at
start-up only, nothing per step. Every rank computes the same line from the same announcements, so every
rank refuses, with the same words, before its model loads.

All ranks form the DP group together (it is a rendezvous), so the announcements arrive within moments
of each other: the timeout only bounds a rank that never announces (no runtime there).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from vllm_ascend.errors import BalanceDisagreementError
from vllm_ascend.log import get_logger, refusal

logger = get_logger(__name__)

AGREEMENT_TIMEOUT_S = 30.0
_POLL_S = 0.05
_KEY = "balance-patchgen/rank-settings/v1/{rank}"
_READ = "balance-patchgen/rank-settings/v1/read/{rank}"
_ACK_S = 10.0  # a refusing rank waits at most this long for the others to have read


class Store(Protocol):
    """What the agreement needs of torch.distributed's store."""

    def set(self, key: str, value: bytes) -> None: ...
    def get(self, key: str) -> bytes: ...
    def check(self, keys: list[str]) -> bool: ...


@dataclass(frozen=True)
class RankSettings:
    balance: bool
    max_num_seqs: int
    copy: str  # where schedule() comes from: "vLLM v0.24.0 (scheduler.py sha256 ...)" or upstream's seam

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> RankSettings | None:
        """None: not an announcement this runtime can read (another runtime version wrote it)."""
        try:
            fields = json.loads(raw)
            settings = cls(bool(fields["balance"]), int(fields["max_num_seqs"]), str(fields["copy"]))
        except (ValueError, TypeError, KeyError):
            return None
        return settings


# A rank's announcement: its settings, None when unreadable; a rank missing from the mapping announced nothing.
Announcements = Mapping[int, RankSettings | None]


def _ranks(ranks: Iterable[int]) -> str:
    """``rank 3``, ``ranks 0 and 2``, ``ranks 0-5 and 7``: consecutive runs of three or more collapsed."""
    ordered = sorted(ranks)
    runs: list[list[int]] = []
    for r in ordered:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    items = [str(r) for run in runs for r in ([f"{run[0]}-{run[-1]}"] if len(run) > 2 else run)]
    text = items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
    return f"rank{'s' if len(ordered) > 1 else ''} {text}"


def _differs(label: str, values: Mapping[int, str]) -> str | None:
    """``label A at ranks .., B at rank ..`` when the ranks hold more than one value, else None."""
    by_value: dict[str, list[int]] = {}
    for rank, value in sorted(values.items()):
        by_value.setdefault(value, []).append(rank)
    if len(by_value) < 2:
        return None
    return f"{label} " + ", ".join(f"{value} at {_ranks(ranks)}" for value, ranks in by_value.items())


def disagreement(found: Announcements, size: int, timeout_s: float, *, store_lost: bool = False) -> str | None:
    """The one line that refuses the group's settings, or None when they agree (or no rank has balance on)."""
    readable = {r: s for r, s in found.items() if s is not None}
    on = {r: s for r, s in readable.items() if s.balance}
    if not on:
        return None  # nothing gathers anywhere: a rank that said nothing cannot be waiting in a gather
    parts = [
        _differs("balance", {r: "on" if s.balance else "off" for r, s in readable.items()}),
        _differs("max_num_seqs", {r: str(s.max_num_seqs) for r, s in on.items()}),
        _differs("schedule() from", {r: s.copy for r, s in on.items()}),
    ]
    if unreadable := [r for r, s in found.items() if s is None]:
        parts.append(f"{_ranks(unreadable)} announced settings this runtime cannot read (another runtime version)")
    if missing := [r for r in range(size) if r not in found]:
        when = "before the DP group's store went away" if store_lost else f"within {timeout_s:g} s"
        parts.append(f"{_ranks(missing)} announced nothing {when} (no balance-patchgen runtime there)")
    reasons = [p for p in parts if p]
    if not reasons:
        return None
    return (
        "balance scheduling differs across the DP group: "
        + "; ".join(reasons)
        + ": start every rank with the same scheduler_config.enable_balance_scheduling (--additional-config), "
        "the same --max-num-seqs and the same vLLM and runtime"
    )


def announce(store: Store, rank: int, settings: RankSettings) -> None:
    store.set(_KEY.format(rank=rank), settings.encode())


def collect(
    store: Store, size: int, timeout_s: float, *, clock: Callable[[], float] = time.monotonic
) -> tuple[dict[int, RankSettings | None], bool]:
    """Every rank's announcement that arrives within ``timeout_s`` (all of them, normally at once), and whether
    the store went away first (its host, rank 0, stopped: a refusing rank 0 waits for ``acknowledge``)."""
    deadline = clock() + timeout_s
    found: dict[int, RankSettings | None] = {}
    try:
        while True:
            for rank in range(size):
                key = _KEY.format(rank=rank)
                if rank not in found and store.check([key]):
                    found[rank] = RankSettings.decode(store.get(key))
            if len(found) == size or clock() >= deadline:
                return found, False
            time.sleep(_POLL_S)
    except RuntimeError:  # torch's DistNetworkError / DistStoreError: the store's host is gone
        return found, True


def _verdict(store: Store, rank: int, size: int, timeout_s: float) -> str | None:
    """This rank's reading of every announcement, acknowledged in the store; on a difference, the rank waits
    (at most ``_ACK_S``) until every rank that announced has read too: a refusing rank stops its process,
    and rank 0's hosts the store, so leaving at once could take the announcements away from a slower reader."""
    found, lost = collect(store, size, timeout_s)
    reason = disagreement(found, size, timeout_s, store_lost=lost)
    if lost:
        return reason
    try:
        store.set(_READ.format(rank=rank), b"1")
        if reason is not None:
            readers = [_READ.format(rank=r) for r in found]
            deadline = time.monotonic() + _ACK_S
            while not store.check(readers) and time.monotonic() < deadline:
                time.sleep(_POLL_S)
    except RuntimeError:
        pass  # the store went away after this rank read: nothing left to wait for
    return reason


def agree(store: Store, rank: int, size: int, settings: RankSettings, timeout_s: float | None = None) -> None:
    """This rank's announcement, then every rank's; a difference raises, logged as one line.

    Balance on or off alike, in the main thread before the engine builds its executor: a refusal there is
    upstream's own failed start-up (its launcher stops the rest), where a signal from a thread could land
    while workers are being spawned and leave them behind. With every rank off the announcements are all
    in moments after the group formed, and nothing is ever read again.
    """
    timeout_s = AGREEMENT_TIMEOUT_S if timeout_s is None else timeout_s
    announce(store, rank, settings)
    if (reason := _verdict(store, rank, size, timeout_s)) is not None:
        raise refusal(logger, BalanceDisagreementError(reason))


def settings_of(vllm_config: Any, balance: bool, copy: str) -> RankSettings:
    return RankSettings(balance, int(vllm_config.scheduler_config.max_num_seqs), copy)

"""Hand-written half of BalanceScheduler: state, the per-step gather and its tripwire. ``schedule()`` is generated."""

import inspect
import socket
import sys
from typing import Any, ClassVar

import torch.distributed as dist
from vllm.v1.core.sched.scheduler import Scheduler

from vllm_ascend.ascend_config import balance_scheduling_enabled, vllm_mismatch_allowed
from vllm_ascend.core.group_max import group_max
from vllm_ascend.core.upstream_guard import check_upstream_file
from vllm_ascend.errors import BalanceNotActiveError
from vllm_ascend.log import get_logger, refusal

logger = get_logger(__name__)

# schedule() calls a balance scheduler may take before the first gather reaches it. The engine's
# busy loop schedules once before its first sync, so 1 is the real-engine figure; 3 leaves room.
UNGATHERED_RUNS_ALLOWED = 3


class BalanceSchedulerBase(Scheduler):
    # Set by the generated subclass: the upstream file its schedule() was copied from (None: no copy).
    UPSTREAM_TAG: ClassVar[str | None]
    UPSTREAM_SHA256: ClassVar[str | None]

    # The leader's count from the last gather: the gate compares this one number. Until a gather (or
    # a harness standing in for one) reaches a scheduler, it reads this class default, and the
    # instance holds no value of its own: that absence is what the tripwire checks, for free.
    balance_leader_running: int = 0

    # Upstream's __init__ changes between releases (0.24 added block_size/hash_block_size): take
    # whatever vLLM passes and present upstream's own signature, instead of a copy per version.
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        vllm_config = self.vllm_config
        self._balance_enabled = balance_scheduling_enabled(vllm_config)
        # Injected by the balance engine core on every step: the group exists before the scheduler
        # but is owned by the engine core, and elastic DP replaces it at run time.
        self.dp_group: dist.ProcessGroup | None = None
        self._balance_ungathered_runs = 0
        # This rank's address for the gather's own connections (group_max), found at the first gather.
        self._balance_gather_host: str | None = None
        if self._balance_enabled and self.UPSTREAM_TAG is not None and self.UPSTREAM_SHA256 is not None:
            check_upstream_file(self.UPSTREAM_TAG, self.UPSTREAM_SHA256, allow=vllm_mismatch_allowed(vllm_config))

    __init__.__signature__ = inspect.signature(Scheduler.__init__)  # type: ignore[attr-defined]

    def balance_running_count(self) -> int:
        """Upstream's running-cap count; the generated subclass returns upstream's own expression."""
        raise NotImplementedError

    def balance_gather(self) -> None:
        """The leader's count: the maximum of upstream's cap count over the live DP group.

        Called by the engine core right after its cross-rank sync, never from ``schedule()``:
        a drained rank runs a dummy batch without entering ``schedule()`` and would miss it. The
        group's size is read on every call (elastic DP resizes it between steps).
        """
        if not self._balance_enabled or self.dp_group is None:
            return
        if self._balance_gather_host is None:
            self._balance_gather_host = gather_host(self.vllm_config)
        self.balance_leader_running = group_max(
            self.balance_running_count(), self.dp_group, host=self._balance_gather_host
        )

    def balance_check_gathered(self) -> None:
        """The tripwire, run at each ``schedule()``: balance on, yet no gather ever reached this scheduler.

        A launcher whose engine core lacks the gather hook (one vLLM adds tomorrow, or a class bound
        before the plugin loaded) would otherwise run with the gate forever open, looking enabled.
        """
        if not self._balance_enabled or "balance_leader_running" in self.__dict__:
            return
        if self._balance_ungathered_runs < UNGATHERED_RUNS_ALLOWED:
            self._balance_ungathered_runs += 1
            return
        engine = _calling_engine_core()
        raise refusal(
            logger,
            BalanceNotActiveError(
                f"balance scheduling is enabled but no per-step gather reached the scheduler in "
                f"{UNGATHERED_RUNS_ALLOWED} schedule() calls: the engine core {engine} never runs "
                "balance_gather() (its class is not one balance scheduling wraps), so the gate would stay "
                "open: launch DP through a supported launcher (docs/deployments.md), or disable "
                "scheduler_config.enable_balance_scheduling"
            ),
        )


def gather_host(vllm_config: Any) -> str:
    """This rank's address for the gather's connections: vLLM's own answer where the operator gave one
    (``VLLM_HOST_IP``), else the local address on the route to the DP master, the interface the ranks
    already reach each other through (127.0.0.1 when the whole group is on one host's loopback)."""
    import vllm.envs as envs

    if envs.VLLM_HOST_IP:
        return str(envs.VLLM_HOST_IP)
    master = str(vllm_config.parallel_config.data_parallel_master_ip)
    family = socket.getaddrinfo(master, None)[0][0]
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((master, 9))  # a datagram socket's connect sends nothing: it only picks the route
        return str(probe.getsockname()[0])


def _calling_engine_core() -> str:
    """The class of the vLLM engine core that is calling ``schedule()``, found on the call stack."""
    from vllm.v1.engine.core import EngineCore

    frame = sys._getframe(2)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, EngineCore):
            cls = type(candidate)
            return f"{cls.__module__}.{cls.__qualname__}"
        frame = frame.f_back  # type: ignore[assignment]
    return "(none on the call stack: schedule() was called directly)"

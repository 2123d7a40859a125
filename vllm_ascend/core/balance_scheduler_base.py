"""Hand-written half of BalanceScheduler: state and the per-step gather. ``schedule()`` is generated."""

import inspect
from typing import Any, ClassVar

import torch
import torch.distributed as dist
from vllm.v1.core.sched.scheduler import Scheduler

from vllm_ascend.ascend_config import balance_scheduling_enabled, vllm_mismatch_allowed
from vllm_ascend.core.upstream_guard import check_upstream_file


class BalanceSchedulerBase(Scheduler):
    # Set by the generated subclass: the upstream file its schedule() was copied from (None: no copy).
    UPSTREAM_TAG: ClassVar[str | None]
    UPSTREAM_SHA256: ClassVar[str | None]

    # Upstream's __init__ changes between releases (0.24 added block_size/hash_block_size): take
    # whatever vLLM passes and present upstream's own signature, instead of a copy per version.
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        vllm_config = self.vllm_config
        self._balance_enabled = balance_scheduling_enabled(vllm_config)
        # Injected by BalanceDPEngineCoreProc: the group exists before the scheduler but is
        # owned by the engine core, and there is no registry to look it up from here.
        self.dp_group: dist.ProcessGroup | None = None
        if self._balance_enabled:
            if self.UPSTREAM_TAG is not None and self.UPSTREAM_SHA256 is not None:
                check_upstream_file(self.UPSTREAM_TAG, self.UPSTREAM_SHA256, allow=vllm_mismatch_allowed(vllm_config))
            dp_size = vllm_config.parallel_config.data_parallel_size
            self.balance_queue = [torch.tensor([0], dtype=torch.int, device="cpu") for _ in range(dp_size)]
            # The leader's count from the last gather: the gate compares this one number.
            self.balance_leader_running = 0

    __init__.__signature__ = inspect.signature(Scheduler.__init__)  # type: ignore[attr-defined]

    def balance_running_count(self) -> int:
        """Upstream's running-cap count; the generated subclass returns upstream's own expression."""
        raise NotImplementedError

    def balance_gather(self) -> None:
        """One all_gather of upstream's cap count across DP ranks, reduced once to the leader's.

        Called by the engine core right after its cross-rank sync, never from ``schedule()``:
        a drained rank runs a dummy batch without entering ``schedule()`` and would miss it.
        """
        if not self._balance_enabled or self.dp_group is None:
            return
        count = torch.tensor([self.balance_running_count()], dtype=torch.int, device="cpu")
        dist.all_gather(self.balance_queue, count, group=self.dp_group)
        self.balance_leader_running = max(int(t.item()) for t in self.balance_queue)

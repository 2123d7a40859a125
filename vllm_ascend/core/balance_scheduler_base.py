"""Hand-written half of BalanceScheduler: state and the per-step gather. ``schedule()`` is generated."""

import torch
import torch.distributed as dist
from vllm.config import VllmConfig
from vllm.multimodal import MULTIMODAL_REGISTRY, MultiModalRegistry
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import KVCacheConfig
from vllm.v1.structured_output import StructuredOutputManager

from vllm_ascend.ascend_config import balance_scheduling_enabled


class BalanceSchedulerBase(Scheduler):
    # Same signature and defaults as upstream Scheduler.__init__ (a test pins this), so vLLM's
    # keyword construction of the scheduler keeps working.
    def __init__(
        self,
        vllm_config: VllmConfig,
        kv_cache_config: KVCacheConfig,
        structured_output_manager: StructuredOutputManager,
        block_size: int,
        hash_block_size: int | None = None,
        mm_registry: MultiModalRegistry = MULTIMODAL_REGISTRY,
        include_finished_set: bool = False,
        log_stats: bool = False,
    ) -> None:
        super().__init__(
            vllm_config=vllm_config,
            kv_cache_config=kv_cache_config,
            structured_output_manager=structured_output_manager,
            block_size=block_size,
            hash_block_size=hash_block_size,
            mm_registry=mm_registry,
            include_finished_set=include_finished_set,
            log_stats=log_stats,
        )
        self._balance_enabled = balance_scheduling_enabled(vllm_config)
        # Injected by BalanceDPEngineCoreProc: the group exists before the scheduler but is
        # owned by the engine core, and there is no registry to look it up from here.
        self.dp_group: dist.ProcessGroup | None = None
        if self._balance_enabled:
            dp_size = vllm_config.parallel_config.data_parallel_size
            self.balance_queue = [torch.tensor([0], dtype=torch.int, device="cpu") for _ in range(dp_size)]

    def balance_gather(self) -> None:
        """One all_gather of ``len(self.running)`` across DP ranks; the gate reads it next step.

        Called by the engine core right after its cross-rank sync, never from ``schedule()``:
        a drained rank runs a dummy batch without entering ``schedule()`` and would miss it.
        """
        if not self._balance_enabled or self.dp_group is None:
            return
        running = torch.tensor([len(self.running)], dtype=torch.int, device="cpu")
        dist.all_gather(self.balance_queue, running, group=self.dp_group)

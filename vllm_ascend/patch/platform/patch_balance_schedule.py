"""Installs balance scheduling into vLLM on import.

- ``vllm.v1.core.sched.scheduler.Scheduler`` is rebound to ``BalanceScheduler`` (generated
  ``schedule()`` + hand-written base); with balance off it delegates to upstream verbatim.
- ``vllm.v1.core.sched.async_scheduler.AsyncScheduler`` is rebound to ``BalanceAsyncScheduler``
  (upstream's AsyncScheduler over BalanceScheduler): vLLM picks it when async scheduling is on.
- ``EngineCoreProc.run_engine_core`` is wrapped: at entry, where ``vllm_config`` is known, the
  module-level ``DPEngineCoreProc`` (which upstream resolves by global name) becomes
  ``BalanceDPEngineCoreProc`` only when balance is on, and upstream's class otherwise.

Importing this module again (or reloading it) re-installs from the saved originals: it never
wraps a wrapper.
"""

from __future__ import annotations

import logging
from typing import Any

import vllm.v1.core.sched.async_scheduler as _async_sched_mod
import vllm.v1.core.sched.scheduler as _sched_mod
import vllm.v1.engine.core as _engine_core_mod

from vllm_ascend.ascend_config import balance_scheduling_enabled as _balance_scheduling_enabled
from vllm_ascend.core.balance_scheduler_base import BalanceSchedulerBase
from vllm_ascend.core.scheduler_path import choose_balance_scheduler

__all__ = [
    "BalanceAsyncScheduler",
    "BalanceDPEngineCoreProc",
    "BalanceNotActiveError",
    "BalanceScheduler",
    "_balance_run_engine_core",
    "_balance_scheduling_enabled",
]

logger = logging.getLogger(__name__)

# Upstream's originals, saved once on the vLLM modules themselves so a re-import finds them.
if not hasattr(_engine_core_mod, "_balance_original_dp_engine_core_proc"):
    _engine_core_mod._balance_original_dp_engine_core_proc = _engine_core_mod.DPEngineCoreProc  # type: ignore[attr-defined]
    _engine_core_mod._balance_original_run_engine_core = _engine_core_mod.EngineCoreProc.run_engine_core  # type: ignore[attr-defined]
    _sched_mod._balance_original_scheduler = _sched_mod.Scheduler  # type: ignore[attr-defined]
    _async_sched_mod._balance_original_async_scheduler = _async_sched_mod.AsyncScheduler  # type: ignore[attr-defined]

_OriginalDPEngineCoreProc = _engine_core_mod._balance_original_dp_engine_core_proc  # type: ignore[attr-defined]
_OriginalRunEngineCore = _engine_core_mod._balance_original_run_engine_core  # type: ignore[attr-defined]
_OriginalAsyncScheduler = _async_sched_mod._balance_original_async_scheduler  # type: ignore[attr-defined]
# The upstream seam where vLLM has it, else the generated copy of schedule().
BalanceScheduler = choose_balance_scheduler(_sched_mod._balance_original_scheduler)  # type: ignore[attr-defined]


class BalanceNotActiveError(RuntimeError):
    """Balance scheduling is enabled but the engine would run without it: fail at start-up, not silently."""


class BalanceAsyncScheduler(_OriginalAsyncScheduler, BalanceScheduler):  # type: ignore[misc, valid-type]
    """Upstream's AsyncScheduler (its output-placeholder bookkeeping) over the balance ``schedule()``.

    With async scheduling the engine schedules step N+1 before step N's output is processed, so
    ``self.running`` already holds requests admitted into batches still in flight. The gate reads
    the counts gathered at the end of the previous busy-loop iteration: the same slots upstream's
    own cap check counts when ``schedule()`` runs next, one iteration earlier on every rank alike.
    """


class BalanceDPEngineCoreProc(_OriginalDPEngineCoreProc):  # type: ignore[misc, valid-type]
    """Adds one ``balance_gather()`` per active step, right after upstream's cross-rank sync.

    That sync is the only per-iteration point where ranks agree on wave/idle state: gathering
    inside ``schedule()`` deadlocks (drained ranks never enter it), and gathering in
    ``_process_engine_step`` deadlocks at wave boundaries (it runs before the sync). When all
    ranks are idle the busy loop skips this method on every rank alike, and so the gather.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._check_balance_active()

    def _check_balance_active(self) -> None:
        """Balance is on (this class is only chosen then): the scheduler upstream built must gate."""
        scheduler = type(self.scheduler)
        if not (issubclass(scheduler, BalanceSchedulerBase) and self.scheduler._balance_enabled):
            raise BalanceNotActiveError(
                f"balance scheduling is enabled but the engine core's scheduler is {scheduler.__module__}."
                f"{scheduler.__qualname__}, not a balance scheduler: unset scheduler_cls, or disable "
                "scheduler_config.enable_balance_scheduling"
            )
        logger.info(
            "balance scheduling active on DP rank %s: engine core %s, scheduler %s",
            self.dp_rank,
            type(self).__name__,
            scheduler.__name__,
        )

    def _has_global_unfinished_reqs(self, local_unfinished: bool) -> bool:
        result = super()._has_global_unfinished_reqs(local_unfinished)
        self.scheduler.dp_group = self.dp_group
        self.scheduler.balance_gather()
        return result


def _balance_run_engine_core(*args: Any, dp_rank: int = 0, local_dp_rank: int = 0, **kwargs: Any) -> Any:
    vllm_config = kwargs.get("vllm_config")
    if _balance_scheduling_enabled(vllm_config):
        _require_dp_engine_core(vllm_config, dp_rank)
        _engine_core_mod.DPEngineCoreProc = BalanceDPEngineCoreProc  # type: ignore[misc]
    else:
        _engine_core_mod.DPEngineCoreProc = _OriginalDPEngineCoreProc  # type: ignore[misc]
    return _OriginalRunEngineCore(*args, dp_rank=dp_rank, local_dp_rank=local_dp_rank, **kwargs)


def _require_dp_engine_core(vllm_config: Any, dp_rank: int) -> None:
    """Upstream builds DPEngineCoreProc only for DP > 1 with an MoE model; elsewhere the gather never runs.

    Mirrors run_engine_core's own condition (a guard test pins it against upstream's source).
    """
    data_parallel = vllm_config.parallel_config.data_parallel_size > 1 or dp_rank > 0
    if not (data_parallel and vllm_config.model_config.is_moe):
        raise BalanceNotActiveError(
            "balance scheduling is enabled but vLLM runs its DP engine core only for data_parallel_size > 1 "
            f"with an MoE model (here data_parallel_size={vllm_config.parallel_config.data_parallel_size}, "
            f"MoE={vllm_config.model_config.is_moe}): disable scheduler_config.enable_balance_scheduling"
        )


# Scheduler is resolved by module-global name when scheduler_cls is unset (the PD-mixed path);
# schedulers chosen through scheduler_cls bypass this name, which is intended.
_sched_mod.Scheduler = BalanceScheduler  # type: ignore[misc, assignment]
# get_scheduler_cls() imports AsyncScheduler by name when async scheduling is on (vLLM's GPU default).
_async_sched_mod.AsyncScheduler = BalanceAsyncScheduler  # type: ignore[misc]
_engine_core_mod.EngineCoreProc.run_engine_core = staticmethod(_balance_run_engine_core)

"""Installs balance scheduling into vLLM on import.

- ``vllm.v1.core.sched.scheduler.Scheduler`` is rebound to ``BalanceScheduler`` (generated
  ``schedule()`` or the upstream seam, + hand-written base); with balance off it delegates to
  upstream verbatim.
- ``vllm.v1.core.sched.async_scheduler.AsyncScheduler`` is rebound to ``BalanceAsyncScheduler``
  (upstream's AsyncScheduler over BalanceScheduler): vLLM picks it when async scheduling is on.
- Every launcher gets the gather hook where it picks its engine core class, only when balance is on:
  ``EngineCoreProc.run_engine_core`` (multiprocessing: offline, ``vllm serve``, headless, external
  LB) swaps the module-level ``DPEngineCoreProc`` for ``BalanceDPEngineCoreProc``;
  ``CoreEngineActorManager`` (Ray) gets ``BalanceDPMoEEngineCoreActor`` for
  ``DPMoEEngineCoreActor``. Balance off: upstream's classes, restored.
- A launcher nobody wrapped is caught by the scheduler's tripwire (``balance_check_gathered``).

Importing this module again (or reloading it) re-installs from the saved originals: it never
wraps a wrapper.
"""

from __future__ import annotations

import functools
from typing import Any

import vllm.envs as envs
import vllm.v1.core.sched.async_scheduler as _async_sched_mod
import vllm.v1.core.sched.scheduler as _sched_mod
import vllm.v1.engine.core as _engine_core_mod
import vllm.v1.engine.utils as _engine_utils_mod

from vllm_ascend.ascend_config import balance_scheduling_enabled as _balance_scheduling_enabled
from vllm_ascend.core import rank_agreement
from vllm_ascend.core.balance_scheduler_base import BalanceSchedulerBase
from vllm_ascend.core.scheduler_path import choose_balance_scheduler, copy_identity, schedule_origin
from vllm_ascend.errors import BalanceNotActiveError
from vllm_ascend.log import get_logger, refusal

__all__ = [
    "BalanceAsyncScheduler",
    "BalanceDPEngineCoreProc",
    "BalanceDPMoEEngineCoreActor",
    "BalanceNotActiveError",
    "BalanceScheduler",
    "_balance_run_engine_core",
    "_balance_scheduling_enabled",
]

logger = get_logger(__name__)


def _original(module: Any, key: str, current: Any) -> Any:
    """Upstream's object, saved once on the vLLM module itself so that a re-import finds it, not ours."""
    saved = f"_balance_original_{key}"
    if not hasattr(module, saved):
        setattr(module, saved, current)
    return getattr(module, saved)


_Manager = _engine_utils_mod.CoreEngineActorManager
_OriginalDPEngineCoreProc = _original(_engine_core_mod, "dp_engine_core_proc", _engine_core_mod.DPEngineCoreProc)
_OriginalRunEngineCore = _original(_engine_core_mod, "run_engine_core", _engine_core_mod.EngineCoreProc.run_engine_core)
_OriginalScheduler = _original(_sched_mod, "scheduler", _sched_mod.Scheduler)
_OriginalAsyncScheduler = _original(_async_sched_mod, "async_scheduler", _async_sched_mod.AsyncScheduler)
_OriginalDPMoEActor = _original(_engine_core_mod, "dp_moe_actor", _engine_core_mod.DPMoEEngineCoreActor)
_OriginalActorManagerInit = _original(_engine_utils_mod, "actor_manager_init", _Manager.__init__)
_OriginalScaleUpElasticEP = _original(_engine_utils_mod, "scale_up_elastic_ep", _Manager.scale_up_elastic_ep)
_OriginalInitDataParallel = _original(
    _engine_core_mod, "init_data_parallel", _OriginalDPEngineCoreProc._init_data_parallel
)
# The upstream seam where vLLM has it, else the generated copy of schedule().
_ChosenScheduler: Any = choose_balance_scheduler(_OriginalScheduler)


class BalanceScheduler(_ChosenScheduler):
    """The chosen balance scheduler, with the tripwire checked before each ``schedule()``."""

    @functools.wraps(_ChosenScheduler.schedule)
    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        self.balance_check_gathered()
        return super().schedule(*args, **kwargs)


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
            raise refusal(
                logger,
                BalanceNotActiveError(
                    f"balance scheduling is enabled but the engine core's scheduler is {scheduler.__module__}."
                    f"{scheduler.__qualname__}, not a balance scheduler: unset scheduler_cls, or disable "
                    "scheduler_config.enable_balance_scheduling"
                ),
            )
        logger.info(
            "balance scheduling active on DP rank %s: engine core %s, scheduler %s, %s",
            self.dp_rank,
            type(self).__name__,
            scheduler.__name__,
            schedule_origin(scheduler),
        )

    def _has_global_unfinished_reqs(self, local_unfinished: bool) -> bool:
        result = super()._has_global_unfinished_reqs(local_unfinished)
        # Every step: elastic DP replaces the group at run time.
        self.scheduler.dp_group = self.dp_group
        self.scheduler.balance_gather()
        return result


class BalanceDPMoEEngineCoreActor(_OriginalDPMoEActor, BalanceDPEngineCoreProc):  # type: ignore[misc, valid-type]
    """Ray's DP MoE engine core with the gather hook: upstream's actor over ``BalanceDPEngineCoreProc``.

    Upstream's actor calls ``DPEngineCoreProc.__init__`` by name, which skips ours; the start-up
    check runs here instead.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._check_balance_active()


def _balance_run_engine_core(*args: Any, dp_rank: int = 0, local_dp_rank: int = 0, **kwargs: Any) -> Any:
    vllm_config = kwargs.get("vllm_config")
    if _balance_scheduling_enabled(vllm_config):
        _require_dp_engine_core(vllm_config, dp_rank)
        _engine_core_mod.DPEngineCoreProc = BalanceDPEngineCoreProc  # type: ignore[misc]
    else:
        _engine_core_mod.DPEngineCoreProc = _OriginalDPEngineCoreProc  # type: ignore[misc]
    return _OriginalRunEngineCore(*args, dp_rank=dp_rank, local_dp_rank=local_dp_rank, **kwargs)


def _require_dp_engine_core(vllm_config: Any, dp_rank: int) -> None:
    """Upstream builds its DP engine core only for DP > 1 with an MoE model; elsewhere the gather never runs.

    Mirrors run_engine_core's and CoreEngineActorManager's own condition (guard tests pin both
    against upstream's source).
    """
    data_parallel = vllm_config.parallel_config.data_parallel_size > 1 or dp_rank > 0
    if not (data_parallel and vllm_config.model_config.is_moe):
        _configure_vllm_logging(vllm_config)
        raise refusal(
            logger,
            BalanceNotActiveError(
                "balance scheduling is enabled but vLLM runs its DP engine core only for data_parallel_size > 1 "
                f"with an MoE model (here data_parallel_size={vllm_config.parallel_config.data_parallel_size}, "
                f"MoE={vllm_config.model_config.is_moe}): disable scheduler_config.enable_balance_scheduling"
            ),
        )


def _configure_vllm_logging(vllm_config: Any) -> None:
    """Apply vLLM's logging configuration in this process before a refusal is logged from it.

    vLLM 0.3x configures logging in a spawned engine core only inside ``run_engine_core`` (from
    ``vllm_config.logging_config``); a refusal raised before that prints a bare line, not vLLM's.
    Only on the refusal path: on the way to upstream, it configures logging itself, once.
    Earlier vLLMs configure logging when ``vllm.logger`` is imported and have no ``logging_config``.
    """
    logging_config = getattr(vllm_config, "logging_config", None)
    if logging_config is not None:
        import vllm.logger

        # getattr: the function exists only where logging_config does (0.3x), not in the pinned 0.2x.
        getattr(vllm.logger, "configure_logging")(logging_config)  # noqa: B009


@functools.wraps(_OriginalInitDataParallel)
def _balance_init_data_parallel(self: Any, vllm_config: Any) -> None:
    """Upstream's DP group, then the group's start-up agreement on balance (``rank_agreement``), on or off.

    On upstream's own class, so that a balance-off rank (upstream's engine core, no collective) takes part
    too: its key in the group's store, and the others' read once. A rank joining a running group
    (elastic scale-up) skips it: the running ranks announced in the store of the group they formed.
    """
    _OriginalInitDataParallel(self, vllm_config)
    if envs.VLLM_ELASTIC_EP_SCALE_UP_LAUNCH:  # upstream's own reading of it, as its engine core does
        return
    balance = _balance_scheduling_enabled(vllm_config)
    store = getattr(self, "dp_store", None)
    if store is None:
        if balance:
            raise refusal(
                logger,
                BalanceNotActiveError(
                    "balance scheduling is enabled but this vLLM's DP engine core keeps no dp_store, so its ranks "
                    "cannot agree on balance at start-up: use a vLLM release balance-patchgen supports"
                ),
            )
        return
    settings = rank_agreement.settings_of(vllm_config, balance, copy_identity(_ChosenScheduler))
    rank_agreement.agree(store, self.dp_rank, self.dp_size, settings)


def _choose_ray_actor(vllm_config: Any) -> None:
    """Ray builds its engine cores from the name in vllm.v1.engine.core, read when the manager runs."""
    if _balance_scheduling_enabled(vllm_config):
        _require_dp_engine_core(vllm_config, 0)
        _engine_core_mod.DPMoEEngineCoreActor = BalanceDPMoEEngineCoreActor  # type: ignore[misc]
    else:
        _engine_core_mod.DPMoEEngineCoreActor = _OriginalDPMoEActor  # type: ignore[misc]


@functools.wraps(_OriginalActorManagerInit)
def _balance_actor_manager_init(self: Any, vllm_config: Any, *args: Any, **kwargs: Any) -> None:
    _choose_ray_actor(vllm_config)
    _OriginalActorManagerInit(self, vllm_config, *args, **kwargs)


@functools.wraps(_OriginalScaleUpElasticEP)
def _balance_scale_up_elastic_ep(self: Any, cur_vllm_config: Any, *args: Any, **kwargs: Any) -> Any:
    _choose_ray_actor(cur_vllm_config)
    return _OriginalScaleUpElasticEP(self, cur_vllm_config, *args, **kwargs)


# Scheduler is resolved by module-global name when scheduler_cls is unset (the PD-mixed path);
# schedulers chosen through scheduler_cls bypass this name, which is intended.
_sched_mod.Scheduler = BalanceScheduler  # type: ignore[misc]
# get_scheduler_cls() imports AsyncScheduler by name when async scheduling is on (vLLM's GPU default).
_async_sched_mod.AsyncScheduler = BalanceAsyncScheduler  # type: ignore[misc]
_engine_core_mod.EngineCoreProc.run_engine_core = staticmethod(_balance_run_engine_core)
_Manager.__init__ = _balance_actor_manager_init  # type: ignore[method-assign]
_Manager.scale_up_elastic_ep = _balance_scale_up_elastic_ep  # type: ignore[method-assign]
# Every DP engine core, balance on or off: the start-up agreement (the class itself stays upstream's).
_OriginalDPEngineCoreProc._init_data_parallel = _balance_init_data_parallel

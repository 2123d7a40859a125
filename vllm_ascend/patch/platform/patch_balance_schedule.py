"""Installs balance scheduling into vLLM on import.

- ``vllm.v1.core.sched.scheduler.Scheduler`` is rebound to ``BalanceScheduler`` (generated
  ``schedule()`` + hand-written base); with balance off it delegates to upstream verbatim.
- ``EngineCoreProc.run_engine_core`` is wrapped: at entry, where ``vllm_config`` is known, the
  module-level ``DPEngineCoreProc`` (which upstream resolves by global name) becomes
  ``BalanceDPEngineCoreProc`` only when balance is on, and upstream's class otherwise.

Importing this module again (or reloading it) re-installs from the saved originals: it never
wraps a wrapper.
"""

from __future__ import annotations

from typing import Any

import vllm.v1.core.sched.scheduler as _sched_mod
import vllm.v1.engine.core as _engine_core_mod

from vllm_ascend._generated.balance_scheduler import BalanceScheduler
from vllm_ascend.ascend_config import balance_scheduling_enabled as _balance_scheduling_enabled

__all__ = ["BalanceDPEngineCoreProc", "BalanceScheduler", "_balance_run_engine_core", "_balance_scheduling_enabled"]

# Upstream's originals, saved once on the vLLM modules themselves so a re-import finds them.
if not hasattr(_engine_core_mod, "_balance_original_dp_engine_core_proc"):
    _engine_core_mod._balance_original_dp_engine_core_proc = _engine_core_mod.DPEngineCoreProc  # type: ignore[attr-defined]
    _engine_core_mod._balance_original_run_engine_core = _engine_core_mod.EngineCoreProc.run_engine_core  # type: ignore[attr-defined]
    _sched_mod._balance_original_scheduler = _sched_mod.Scheduler  # type: ignore[attr-defined]

_OriginalDPEngineCoreProc = _engine_core_mod._balance_original_dp_engine_core_proc  # type: ignore[attr-defined]
_OriginalRunEngineCore = _engine_core_mod._balance_original_run_engine_core  # type: ignore[attr-defined]


class BalanceDPEngineCoreProc(_OriginalDPEngineCoreProc):  # type: ignore[misc, valid-type]
    """Adds one ``balance_gather()`` per active step, right after upstream's cross-rank sync.

    That sync is the only per-iteration point where ranks agree on wave/idle state: gathering
    inside ``schedule()`` deadlocks (drained ranks never enter it), and gathering in
    ``_process_engine_step`` deadlocks at wave boundaries (it runs before the sync). When all
    ranks are idle the busy loop skips this method on every rank alike, and so the gather.
    """

    def _has_global_unfinished_reqs(self, local_unfinished: bool) -> bool:
        result = super()._has_global_unfinished_reqs(local_unfinished)
        self.scheduler.dp_group = self.dp_group
        self.scheduler.balance_gather()
        return result


def _balance_run_engine_core(*args: Any, dp_rank: int = 0, local_dp_rank: int = 0, **kwargs: Any) -> Any:
    if _balance_scheduling_enabled(kwargs.get("vllm_config")):
        _engine_core_mod.DPEngineCoreProc = BalanceDPEngineCoreProc  # type: ignore[misc]
    else:
        _engine_core_mod.DPEngineCoreProc = _OriginalDPEngineCoreProc  # type: ignore[misc]
    return _OriginalRunEngineCore(*args, dp_rank=dp_rank, local_dp_rank=local_dp_rank, **kwargs)


# Scheduler is resolved by module-global name when scheduler_cls is unset (the PD-mixed path);
# schedulers chosen through scheduler_cls bypass this name, which is intended.
_sched_mod.Scheduler = BalanceScheduler  # type: ignore[misc]
_engine_core_mod.EngineCoreProc.run_engine_core = staticmethod(_balance_run_engine_core)

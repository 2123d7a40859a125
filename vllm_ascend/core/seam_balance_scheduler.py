"""BalanceScheduler for a vLLM whose Scheduler has the ``_should_stop_admitting_waiting()`` seam.

Nothing of upstream is copied: ``schedule()`` is upstream's own, and only its admission stop is
extended. Each rank's own upstream verdict (1 = its cap check stops admission) is what it sends in
the per-step gather, so "the leader at cap" is "any rank's own upstream check stops": the same
freeze the generated copy computes from the gathered counts.
"""

from __future__ import annotations

from typing import ClassVar

from vllm_ascend.core.balance_scheduler_base import BalanceSchedulerBase

SEAM_METHOD = "_should_stop_admitting_waiting"


class SeamBalanceScheduler(BalanceSchedulerBase):
    # Nothing copied, so nothing to compare with the installed scheduler.py.
    UPSTREAM_TAG: ClassVar[str | None] = None
    UPSTREAM_SHA256: ClassVar[str | None] = None

    def balance_running_count(self) -> int:
        return int(super()._should_stop_admitting_waiting())  # type: ignore[misc]

    def _should_stop_admitting_waiting(self) -> bool:
        if super()._should_stop_admitting_waiting():  # type: ignore[misc]
            return True
        # The previous step's gather: did any rank's own check stop it?
        return self._balance_enabled and self.balance_leader_running > 0

"""The one place that decides which BalanceScheduler runs: the upstream seam if vLLM has it, else the copy."""

from __future__ import annotations

import logging

from vllm_ascend.core.seam_balance_scheduler import SEAM_METHOD

logger = logging.getLogger(__name__)


def choose_balance_scheduler(upstream_scheduler: type) -> type:
    if hasattr(upstream_scheduler, SEAM_METHOD):
        from vllm_ascend.core.seam_balance_scheduler import SeamBalanceScheduler

        logger.info("balance scheduling: vLLM's Scheduler has %s(); overriding it, no copied schedule()", SEAM_METHOD)
        return SeamBalanceScheduler
    from vllm_ascend._generated.balance_scheduler import BalanceScheduler

    logger.info(
        "balance scheduling: vLLM's Scheduler has no %s(); using schedule() generated from vLLM %s",
        SEAM_METHOD,
        BalanceScheduler.UPSTREAM_TAG,
    )
    return BalanceScheduler

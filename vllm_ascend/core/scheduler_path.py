"""The one place that decides which BalanceScheduler runs: the upstream seam if vLLM has it, else the copy."""

from __future__ import annotations

from vllm_ascend.core.seam_balance_scheduler import SEAM_METHOD
from vllm_ascend.log import get_logger

logger = get_logger(__name__)


def choose_balance_scheduler(upstream_scheduler: type) -> type:
    if hasattr(upstream_scheduler, SEAM_METHOD):
        from vllm_ascend.core.seam_balance_scheduler import SeamBalanceScheduler

        chosen: type = SeamBalanceScheduler
    else:
        from vllm_ascend._generated.balance_scheduler import BalanceScheduler

        chosen = BalanceScheduler
    # Every process vLLM starts loads the plugin, balance on or off: the rank's start-up line says it
    # at INFO, once, where balance is on.
    logger.debug("balance scheduling: %s", schedule_origin(chosen))
    return chosen


def schedule_origin(scheduler: type) -> str:
    """Where the running ``schedule()`` comes from, for the start-up line."""
    tag = getattr(scheduler, "UPSTREAM_TAG", None)
    if tag is None:
        return f"schedule() is upstream's own, gated through its {SEAM_METHOD}() seam"
    sha256 = getattr(scheduler, "UPSTREAM_SHA256", None) or ""
    return f"schedule() generated from vLLM {tag} (scheduler.py sha256 {sha256[:12]})"

"""The DP ranks: one real scheduler each, and what the gate reads (the one place that knows the runtime's
interface: the leader's count the per-step gather delivers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from balance_dev.gloo import one_rank_group
from balance_dev.value_sim.config import SimConfig


def deliver_gather(ranks: Sequence[Any]) -> None:
    """Hand every rank what the per-step gather would deliver: the leader's end-of-step count.

    ``balance_gather()`` takes the maximum of ``balance_running_count()`` (upstream's running-cap count)
    over the group (``group_max``) as ``balance_leader_running``, which the gate compares with the cap
    in the next ``schedule()``.
    """
    leader = max(r.balance_running_count() for r in ranks)
    for s in ranks:
        s.balance_leader_running = leader


def leader_count(scheduler: Any) -> int:
    return int(scheduler.balance_leader_running)


def upstream_scheduler() -> type:
    """The installed vLLM's own Scheduler (the patch rebinds the module's name to BalanceScheduler)."""
    import vllm.v1.core.sched.scheduler as sched_mod

    import vllm_ascend.patch.platform.patch_balance_schedule  # noqa: F401  (keeps the original)

    return sched_mod._balance_original_scheduler  # type: ignore[attr-defined]


def single_rank_group() -> Any:
    """A real one-rank gloo group for vLLM's finish sync: the simulator holds every rank in one process."""
    return one_rank_group()


def build_ranks(cfg: SimConfig) -> list[Any]:
    """One scheduler per DP rank, built as the runtime tests build them (one shared config)."""
    import vllm_ascend.patch.platform.patch_balance_schedule as patch
    from balance_dev import vllm_objects as vo

    enabled = cfg.balance in ("on", "on+throttle")
    cls = patch.BalanceScheduler if enabled else upstream_scheduler()
    config = vo.make_vllm_config(
        max_num_seqs=cfg.cap,
        max_num_batched_tokens=cfg.token_budget,
        data_parallel_size=cfg.dp,
        additional_config=vo.balance_config(True) if enabled else None,
    )
    # Room for every running request at the full model length: KV never preempts here.
    blocks = cfg.cap * -(-cfg.lengths.max_model_len // vo.BLOCK_SIZE) + 16
    ranks = [vo.make_scheduler(cls, config, num_blocks=blocks) for _ in range(cfg.dp)]
    if enabled and not all(s._balance_enabled for s in ranks):
        raise RuntimeError("balance did not enable on the BalanceScheduler (a global AscendConfig says off?)")
    return ranks

"""What the recorder and the counter both read of an engine core: its DP rank, its scheduler's cap, class names.

Below both (``recorder`` and ``counter`` import it, it imports neither), so what records and what counts
stay two leaves of ``hook``, which chooses between them.
"""

from __future__ import annotations

from typing import Any


def qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def cap_of(scheduler: Any) -> int:
    cap = getattr(scheduler, "max_num_active_reqs", None)
    return int(cap if cap is not None else scheduler.max_num_running_reqs)


def rank_of(engine: Any) -> int:
    """The engine core's DP rank (``dp_rank`` where the engine core has one, else its config's)."""
    rank = getattr(engine, "dp_rank", None)
    return int(rank if rank is not None else engine.vllm_config.parallel_config.data_parallel_rank)

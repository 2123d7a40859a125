"""A real one-rank gloo group in this process, shared by everything that needs one (tests, the simulator)."""

from __future__ import annotations

from typing import Any


def one_rank_group() -> Any:
    """torch.distributed's default group, initialized once as a one-rank gloo group (HashStore, no network).

    Shared rather than created and destroyed per user: a process has one default group, and a second
    ``init_process_group`` fails while another part of the same process still holds the first.
    """
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    if dist.get_world_size() != 1:
        raise RuntimeError("this process already has a multi-rank torch.distributed group")
    return dist.group.WORLD

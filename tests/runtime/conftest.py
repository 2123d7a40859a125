"""Real vLLM (the pinned release, CPU) with the balance patch installed once per session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from vllm_ascend import ascend_config


@pytest.fixture(scope="session")
def patch_mod() -> Any:
    import vllm_ascend.patch.platform.patch_balance_schedule as patch

    return patch


@pytest.fixture(scope="session")
def upstream_scheduler_cls(patch_mod: Any) -> type:
    import vllm.v1.core.sched.scheduler as sched_mod

    return sched_mod._balance_original_scheduler  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _no_global_ascend_config() -> Iterator[None]:
    ascend_config.clear_ascend_config()
    yield
    ascend_config.clear_ascend_config()


@pytest.fixture(scope="session")
def gloo_world() -> Any:
    """A real single-process gloo group (the multi-process cases: test_group_max, test_dp_sim, ...)."""
    from balance_dev.gloo import one_rank_group

    return one_rank_group()

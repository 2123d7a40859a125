"""Real vLLM (the pinned release, CPU) with the balance patch installed once per session."""

from __future__ import annotations

import dataclasses
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


def summarize(out: Any) -> dict[str, Any]:
    """Everything in a SchedulerOutput that says who runs, resumes, is preempted, and with what."""
    cached = out.scheduled_cached_reqs
    return {
        "new": [(r.req_id, r.num_computed_tokens, r.block_ids) for r in out.scheduled_new_reqs],
        "cached": [dataclasses.asdict(cached)] if dataclasses.is_dataclass(cached) else [repr(cached)],
        "tokens": dict(out.num_scheduled_tokens),
        "total": out.total_num_scheduled_tokens,
        "spec": dict(out.scheduled_spec_decode_tokens),
        "encoder": dict(out.scheduled_encoder_inputs),
        "preempted": sorted(out.preempted_req_ids or ()),
        "finished": sorted(out.finished_req_ids),
        "kv_connector_metadata": out.kv_connector_metadata,
    }

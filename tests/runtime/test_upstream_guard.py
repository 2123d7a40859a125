"""The version guard: balance on refuses a vLLM whose scheduler.py is not the one the copy came from."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import pytest
import vllm
import vllm.v1.core.sched.scheduler as sched_mod

from balance_dev.vllm_objects import balance_config, make_scheduler, make_vllm_config
from vllm_ascend.core import upstream_guard
from vllm_ascend.core.upstream_guard import UpstreamMismatchError


@pytest.fixture(scope="module")
def stale_cls(patch_mod: Any) -> type:
    """The generated class as if it had been generated from another release."""
    return type(
        "StaleBalanceScheduler",
        (patch_mod.BalanceScheduler,),
        {"UPSTREAM_TAG": "v0.0.1", "UPSTREAM_SHA256": "0" * 64},
    )


def test_the_committed_module_was_generated_from_the_installed_scheduler(patch_mod: Any) -> None:
    with open(sched_mod.__file__, "rb") as file:
        assert hashlib.sha256(file.read()).hexdigest() == patch_mod.BalanceScheduler.UPSTREAM_SHA256
    make_scheduler(patch_mod.BalanceScheduler, make_vllm_config(additional_config=balance_config(True)))


def test_balance_on_refuses_another_vllm_naming_both_versions_and_the_fix(stale_cls: type) -> None:
    with pytest.raises(UpstreamMismatchError) as info:
        make_scheduler(stale_cls, make_vllm_config(additional_config=balance_config(True)))
    message = str(info.value)
    assert "generated from vLLM v0.0.1" in message
    assert f"installed vLLM {vllm.__version__}" in message
    assert f"balance-patchgen bump v{vllm.__version__}" in message
    assert "\n" not in message


def test_the_development_switch_allows_the_mismatch_with_a_warning(
    stale_cls: type, caplog: pytest.LogCaptureFixture
) -> None:
    config = {"scheduler_config": {"enable_balance_scheduling": True, "balance_allow_vllm_mismatch": True}}
    # The guard's own logger (a child of vLLM's ``vllm`` logger), at WARNING whatever level this process's
    # vLLM logging has: 0.3x configures it lazily, from VLLM_LOGGING_LEVEL as it is when an earlier test
    # first runs run_engine_core in this process, and a module of the suite may have set that to ERROR.
    with caplog.at_level(logging.WARNING, logger=upstream_guard.logger.name):
        scheduler = make_scheduler(stale_cls, make_vllm_config(additional_config=config))
    assert scheduler._balance_enabled
    warnings = [
        r
        for r in caplog.records
        if r.name == upstream_guard.logger.name and r.levelno == logging.WARNING and "running anyway" in r.getMessage()
    ]
    assert len(warnings) == 1, [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert "generated from vLLM v0.0.1" in warnings[0].getMessage()
    assert upstream_guard.ALLOW_KEY in warnings[0].getMessage()


def test_balance_off_checks_nothing(stale_cls: type) -> None:
    scheduler = make_scheduler(stale_cls, make_vllm_config(additional_config=balance_config(False)))
    assert not scheduler._balance_enabled


def test_the_switch_must_be_a_boolean() -> None:
    from vllm_ascend.ascend_config import AscendConfigError, parse_additional_config

    with pytest.raises(AscendConfigError, match="balance_allow_vllm_mismatch must be true or false"):
        parse_additional_config({"scheduler_config": {"balance_allow_vllm_mismatch": "yes"}})

"""Contract 5: the existing constraints still hold (config parsing, profiling_chunk, PD-mixed)."""

from __future__ import annotations

import pytest
from vllm.config import KVTransferConfig

from balance_dev.vllm_objects import balance_config, make_vllm_config
from vllm_ascend.ascend_config import (
    AscendConfigError,
    balance_scheduling_enabled,
    get_ascend_config,
    init_ascend_config,
    parse_additional_config,
)
from vllm_ascend.platform import check_and_update_config


@pytest.mark.parametrize(
    ("additional", "enabled"),
    [
        (None, False),
        ({}, False),
        ({"scheduler_config": {"enable_balance_scheduling": True}}, True),
        ({"scheduler_config": {"enable_balance_scheduling": False}}, False),
        ({"scheduler_config": {}}, False),
        ({"enable_balance_scheduling": True}, True),  # legacy top-level key
        # The nested key wins over the legacy one, whichever way they disagree.
        ({"scheduler_config": {"enable_balance_scheduling": False}, "enable_balance_scheduling": True}, False),
        ({"scheduler_config": {"enable_balance_scheduling": True}, "enable_balance_scheduling": False}, True),
        ({"scheduler_config": None, "enable_balance_scheduling": True}, True),  # a null section falls through
        ({"scheduler_config": {}, "enable_balance_scheduling": True}, True),
    ],
)
def test_the_switch_is_read_from_additional_config(additional: dict | None, enabled: bool) -> None:
    assert parse_additional_config(additional).enable_balance_scheduling is enabled


@pytest.mark.parametrize(
    ("additional", "message"),
    [
        ({"scheduler_config": {"enable_balance_scheduling": "true"}}, "must be true or false, got 'true'"),
        ({"scheduler_config": {"enable_balance_scheduling": 1}}, "must be true or false"),
        ({"scheduler_config": ["enable_balance_scheduling"]}, "must be a dict, got list"),
        (
            {"scheduler_config": {"enable_balance_scheduling": True}, "profiling_chunk_config": {"enabled": True}},
            "mutually exclusive",
        ),
    ],
)
def test_invalid_settings_are_clear_errors(additional: dict, message: str) -> None:
    with pytest.raises(AscendConfigError, match=message):
        parse_additional_config(additional)


def test_profiling_chunk_without_balance_is_fine() -> None:
    assert not parse_additional_config({"profiling_chunk_config": {"enabled": True}}).enable_balance_scheduling


def test_no_environment_variable_turns_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "VLLM_ASCEND_BALANCE_SCHEDULING",
        "VLLM_ASCEND_ENABLE_BALANCE_SCHEDULING",
        "ENABLE_BALANCE_SCHEDULING",
    ):
        monkeypatch.setenv(name, "1")
    assert balance_scheduling_enabled(make_vllm_config()) is False


def test_initialized_ascend_config_wins_over_additional_config() -> None:
    # During start-up (not initialized) additional_config is read; once initialized, AscendConfig is.
    on = make_vllm_config(additional_config=balance_config(True))
    assert balance_scheduling_enabled(on) is True
    init_ascend_config(make_vllm_config(additional_config=balance_config(False)))
    assert get_ascend_config().enable_balance_scheduling is False
    assert balance_scheduling_enabled(on) is False


@pytest.mark.parametrize("role", ["kv_producer", "kv_consumer"])
def test_balance_outside_pd_mixed_is_refused_at_config_time(role: str) -> None:
    config = make_vllm_config(
        additional_config=balance_config(True),
        kv_transfer_config=KVTransferConfig(kv_connector="ExampleConnector", kv_role=role),
    )
    with pytest.raises(AscendConfigError, match=f"only PD-mixed mode.*{role}"):
        check_and_update_config(config)


def test_pd_mixed_roles_are_accepted() -> None:
    check_and_update_config(make_vllm_config(additional_config=balance_config(True)))
    both = KVTransferConfig(kv_connector="ExampleConnector", kv_role="kv_both")
    check_and_update_config(make_vllm_config(additional_config=balance_config(True), kv_transfer_config=both))
    # Balance off: any role is fine.
    producer = KVTransferConfig(kv_connector="ExampleConnector", kv_role="kv_producer")
    check_and_update_config(make_vllm_config(additional_config=balance_config(False), kv_transfer_config=producer))


def test_an_initialized_ascend_config_wins_over_additional_config() -> None:
    """The seed's order: AscendConfig first; additional_config only before it is initialized."""
    on = make_vllm_config(additional_config={"scheduler_config": {"enable_balance_scheduling": True}})
    off = make_vllm_config(additional_config={"scheduler_config": {"enable_balance_scheduling": False}})
    assert balance_scheduling_enabled(off) is False  # start-up window: nothing initialized yet
    init_ascend_config(on)
    try:
        assert balance_scheduling_enabled(off) is True
    finally:
        from vllm_ascend.ascend_config import clear_ascend_config

        clear_ascend_config()
    assert balance_scheduling_enabled(off) is False

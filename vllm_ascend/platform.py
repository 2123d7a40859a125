"""Config-time validation of balance scheduling: unsupported combinations fail here, not as a hang."""

from __future__ import annotations

from typing import Any

from vllm_ascend.ascend_config import AscendConfigError, init_ascend_config


def check_and_update_config(vllm_config: Any) -> None:
    """What vllm-ascend's platform hook runs once the VllmConfig exists."""
    ascend_config = init_ascend_config(vllm_config)
    if ascend_config.enable_balance_scheduling:
        check_pd_mixed(vllm_config)


def check_pd_mixed(vllm_config: Any) -> None:
    kv_transfer = getattr(vllm_config, "kv_transfer_config", None)
    if kv_transfer is None:
        return
    role = getattr(kv_transfer, "kv_role", None)
    if role != "kv_both":
        raise AscendConfigError(
            f"balance scheduling supports only PD-mixed mode, but kv_transfer_config.kv_role is {role!r}: "
            "use kv_role='kv_both' or disable scheduler_config.enable_balance_scheduling"
        )

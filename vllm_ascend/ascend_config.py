"""Ascend options read from ``vllm_config.additional_config``; only what balance scheduling needs.

Balance scheduling is switched on by
``additional_config={"scheduler_config": {"enable_balance_scheduling": True}}`` (the legacy
top-level ``enable_balance_scheduling`` key is still accepted). There is no environment variable.

Where the answer comes from, in the seed's order (vllm-ascend's too): the initialized AscendConfig;
before it is initialized (the start-up window), ``additional_config``: the nested key first, then
the top-level one. Stricter than vllm-ascend on purpose: a ``scheduler_config`` that is neither a
dict nor null, or a switch that is not a bool, is refused at start-up, because ignoring a mistyped
setting silently runs the other mode on that rank (issue: ranks must agree on balance).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vllm_ascend.errors import AscendConfigError as AscendConfigError  # re-exported: its old home


@dataclass(frozen=True)
class AscendSchedulerConfig:
    enable_balance_scheduling: bool = False
    # Development against an unreleased vLLM (the seed's main-verified lane): run the copied
    # schedule() even when the installed scheduler.py is not the one it was generated from.
    balance_allow_vllm_mismatch: bool = False


@dataclass(frozen=True)
class AscendConfig:
    scheduler_config: AscendSchedulerConfig
    profiling_chunk_config: Mapping[str, Any] | None

    @property
    def enable_balance_scheduling(self) -> bool:
        return self.scheduler_config.enable_balance_scheduling


_ascend_config: AscendConfig | None = None


def parse_additional_config(additional_config: Mapping[str, Any] | None) -> AscendConfig:
    config = dict(additional_config or {})
    scheduler = config.get("scheduler_config", {})
    if scheduler is None:
        scheduler = {}
    if not isinstance(scheduler, Mapping):
        raise AscendConfigError(
            f"additional_config['scheduler_config'] must be a dict, got {type(scheduler).__name__}: "
            'use {"scheduler_config": {"enable_balance_scheduling": true}}'
        )
    nested = scheduler.get("enable_balance_scheduling")
    legacy = config.get("enable_balance_scheduling")
    for where, value in (("scheduler_config.enable_balance_scheduling", nested), ("enable_balance_scheduling", legacy)):
        if value is not None and not isinstance(value, bool):
            raise AscendConfigError(f"additional_config {where} must be true or false, got {value!r}")
    # The seed's order (and vllm-ascend's): the nested key, then the legacy top-level one. A legacy key
    # left beside the nested one is the leftover of a migration, not a conflict to refuse.
    enabled = bool(nested if nested is not None else legacy)
    allow_mismatch = scheduler.get("balance_allow_vllm_mismatch", False)
    if not isinstance(allow_mismatch, bool):
        raise AscendConfigError(
            "additional_config scheduler_config.balance_allow_vllm_mismatch must be true or false, "
            f"got {allow_mismatch!r}"
        )
    profiling = config.get("profiling_chunk_config")
    if enabled and profiling:
        raise AscendConfigError(
            "balance scheduling and profiling_chunk_config are mutually exclusive: disable one of them"
        )
    return AscendConfig(AscendSchedulerConfig(enabled, allow_mismatch), profiling)


def init_ascend_config(vllm_config: Any) -> AscendConfig:
    global _ascend_config
    _ascend_config = parse_additional_config(getattr(vllm_config, "additional_config", None))
    return _ascend_config


def get_ascend_config() -> AscendConfig:
    if _ascend_config is None:
        raise RuntimeError("AscendConfig is not initialized: call init_ascend_config(vllm_config) first")
    return _ascend_config


def clear_ascend_config() -> None:
    global _ascend_config
    _ascend_config = None


def _current(vllm_config: Any) -> AscendConfig | None:
    """AscendConfig when initialized; ``additional_config`` during start-up, before it is."""
    if _ascend_config is not None:
        return _ascend_config
    if vllm_config is None:
        return None
    return parse_additional_config(getattr(vllm_config, "additional_config", None))


def balance_scheduling_enabled(vllm_config: Any) -> bool:
    config = _current(vllm_config)
    return config is not None and config.enable_balance_scheduling


def vllm_mismatch_allowed(vllm_config: Any) -> bool:
    config = _current(vllm_config)
    return config is not None and config.scheduler_config.balance_allow_vllm_mismatch

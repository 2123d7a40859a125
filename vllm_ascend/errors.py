"""Every error the runtime raises on purpose, in one place. Each message is one line: what, and what to do."""

from __future__ import annotations


class AscendConfigError(ValueError):
    """An invalid or unsupported Ascend configuration, reported at config time."""


class BalanceNotActiveError(RuntimeError):
    """Balance scheduling is enabled but the engine would run without it: fail at start-up, not silently."""


class UpstreamMismatchError(RuntimeError):
    """The installed vLLM's scheduler.py is not the file the balance scheduler was generated from."""


class BalanceDisagreementError(RuntimeError):
    """The DP group's ranks differ in balance settings (on/off, running cap, generated copy): refused at start-up."""

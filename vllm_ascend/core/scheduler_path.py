"""The one place that decides which BalanceScheduler runs: the upstream seam if vLLM has it, else the copy."""

from __future__ import annotations

import importlib
import re
from importlib import resources

from vllm_ascend.core.seam_balance_scheduler import SEAM_METHOD
from vllm_ascend.log import get_logger

logger = get_logger(__name__)


def choose_balance_scheduler(upstream_scheduler: type) -> type:
    if hasattr(upstream_scheduler, SEAM_METHOD):
        from vllm_ascend.core.seam_balance_scheduler import SeamBalanceScheduler

        chosen: type = SeamBalanceScheduler
    else:
        chosen = generated_for_installed_vllm()
    # Every process vLLM starts loads the plugin, balance on or off: the rank's start-up line says it
    # at INFO, once, where balance is on.
    logger.debug("balance scheduling: %s", schedule_origin(chosen))
    return chosen


def schedule_origin(scheduler: type) -> str:
    """Where the running ``schedule()`` comes from, for the start-up line."""
    tag = getattr(scheduler, "UPSTREAM_TAG", None)
    if tag is None:
        return f"schedule() is upstream's own, gated through its {SEAM_METHOD}() seam"
    return f"schedule() generated from {copy_identity(scheduler)}"


def copy_identity(scheduler: type) -> str:
    """The copy a rank runs, as the DP group's start-up agreement compares it: tag and upstream sha256."""
    tag = getattr(scheduler, "UPSTREAM_TAG", None)
    if tag is None:
        return f"upstream's own schedule() ({SEAM_METHOD}() seam)"
    sha256 = getattr(scheduler, "UPSTREAM_SHA256", None) or ""
    return f"vLLM {tag} (scheduler.py sha256 {sha256[:12]})"


# One generated module per supported vLLM ref: the pin's tag first (the fallback), then the main-verified
# commit vllm-ascend's CI runs, where generated (`balance-patchgen regen --main-verified`).
GENERATED_PACKAGE = "vllm_ascend._generated"
GENERATED_MODULES = ("balance_scheduler", "balance_scheduler_main_verified")
_SHA256 = re.compile(r"^# upstream sha256:\s+([0-9a-f]{64})$", re.M)


def generated_modules() -> dict[str, str]:
    """Each generated module present, by name, with the upstream sha256 its header records (read, not imported:
    a module generated for another vLLM may not even import on this one)."""
    found = {}
    for name in GENERATED_MODULES:
        path = resources.files(GENERATED_PACKAGE).joinpath(f"{name}.py")
        if path.is_file() and (match := _SHA256.search(path.read_text(encoding="utf-8")[:4096])) is not None:
            found[name] = match.group(1)
    return found


def generated_for_installed_vllm() -> type:
    """The generated BalanceScheduler whose upstream scheduler.py is the installed one, else the pin's.

    The pin's module refuses at start-up, with balance on, when its file is not the installed one
    (``upstream_guard``): falling back to it keeps that one refusal line for "no module matches".
    """
    from vllm_ascend.core.upstream_guard import installed_scheduler_sha256

    modules = generated_modules()
    installed = installed_scheduler_sha256()
    name = next((n for n, sha in modules.items() if sha == installed), GENERATED_MODULES[0])
    chosen: type = importlib.import_module(f"{GENERATED_PACKAGE}.{name}").BalanceScheduler
    return chosen

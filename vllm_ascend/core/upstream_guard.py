"""Refuse to run a copied ``schedule()`` against a vLLM whose scheduler is not the one it was copied from.

The generated module is upstream's method at one tag; on another vLLM it calls helpers whose
signatures moved (0.24's body on 0.27 crashes inside ``schedule()``), or silently misses
upstream fixes. The header's sha256 of upstream's file is the identity we compare.
"""

from __future__ import annotations

import hashlib
import importlib.util
from functools import cache

from vllm_ascend.errors import UpstreamMismatchError as UpstreamMismatchError  # re-exported: its old home
from vllm_ascend.log import get_logger, refusal

logger = get_logger(__name__)

UPSTREAM_MODULE = "vllm.v1.core.sched.scheduler"
ALLOW_KEY = "scheduler_config.balance_allow_vllm_mismatch"


@cache
def installed_scheduler_sha256() -> str:
    spec = importlib.util.find_spec(UPSTREAM_MODULE)
    if spec is None or spec.origin is None:
        raise UpstreamMismatchError(f"balance scheduling: cannot locate {UPSTREAM_MODULE}: is vLLM installed?")
    with open(spec.origin, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()


def installed_vllm_version() -> str:
    import vllm

    return str(getattr(vllm, "__version__", "unknown"))


def check_upstream_file(tag: str, sha256: str, *, allow: bool) -> None:
    installed = installed_scheduler_sha256()
    if installed == sha256:
        return
    version = installed_vllm_version()
    what = (
        f"balance scheduling: vllm_ascend's scheduler was generated from vLLM {tag} (scheduler.py sha256 "
        f"{sha256[:12]}), but the installed vLLM {version} has another scheduler.py (sha256 {installed[:12]})"
    )
    if allow:
        logger.warning("%s; running anyway because %s is set", what, ALLOW_KEY)
        return
    raise refusal(
        logger,
        UpstreamMismatchError(
            f"{what}: run `balance-patchgen bump v{version}` and reinstall vllm_ascend, "
            f"or set additional_config {ALLOW_KEY}=true to run against an unreleased vLLM"
        ),
    )

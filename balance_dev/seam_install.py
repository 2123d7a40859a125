"""Run tests against a vLLM whose scheduler.py carries the upstream seam, without touching site-packages.

``install_scheduler_module(path)`` loads ``path`` as ``vllm.v1.core.sched.scheduler`` before anything
else imports it, so vLLM, the runtime and the tests all see the patched module in this process only.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

MODULE = "vllm.v1.core.sched.scheduler"
ENV = "BALANCE_TEST_SCHEDULER_PY"


def install_scheduler_module(path: str | Path) -> None:
    import vllm.v1.core.sched as package

    if MODULE in sys.modules:
        raise RuntimeError(f"{MODULE} is already imported: install the patched file before anything imports it")

    spec = importlib.util.spec_from_file_location(MODULE, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    spec.loader.exec_module(module)
    package.scheduler = module  # type: ignore[attr-defined]

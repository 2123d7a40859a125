"""The probe's one hook into vLLM: the first engine step of each engine core builds what the mode asks for.

``BALANCE_E2E_PROBE_MODE``: ``full`` (make e2e, e2e-faults: the ``recorder``), ``lean`` (the soak: the
recorder keeping counts, not growing lists; also ``BALANCE_E2E_PROBE_LEAN=1``), ``count`` (the serving
benchmark: the ``counter``), ``off`` (the CPU shims only). This module imports both; neither imports it.
"""

from __future__ import annotations

import os
from typing import Any

_MARK = "_balance_e2e_probe"
# full (make e2e, e2e-faults), lean (the soak), count (the serving benchmark), off (the CPU shims only).
MODE = os.environ.get("BALANCE_E2E_PROBE_MODE") or (
    "lean" if os.environ.get("BALANCE_E2E_PROBE_LEAN") == "1" else "full"
)


def install(out_dir: str, shims: list[str]) -> None:
    if MODE == "off":
        return
    from vllm.v1.engine.core import EngineCoreProc

    from balance_e2e_probe.counter import Counter
    from balance_e2e_probe.recorder import Recorder

    original = EngineCoreProc._process_engine_step
    if getattr(original, _MARK, False):
        return

    def count_step(self: Any) -> Any:
        if _MARK not in self.__dict__:
            self.__dict__[_MARK] = Counter(self, out_dir, shims)
        return original(self)

    def record_step(self: Any) -> Any:
        if _MARK not in self.__dict__:
            self.__dict__[_MARK] = Recorder(self, out_dir, shims, lean=MODE == "lean")
        out = original(self)
        self.__dict__[_MARK].after_step(self.scheduler)
        return out

    step = count_step if MODE == "count" else record_step
    setattr(step, _MARK, True)
    EngineCoreProc._process_engine_step = step

"""The pytest plugin that stands in for vLLM's tests/conftest.py in ``make upstream-tests`` (``-p`` loads it).

Their root conftest imports far more than the scheduler tests use (engines, models, downloads), so it is
not written into the tree and this plugin takes its place. Loaded before any test module is imported, it:

1. with ``BALANCE_UPSTREAM_SCHEDULER_PY`` set, loads that file as ``vllm.v1.core.sched.scheduler`` (the
   seam applied to upstream's scheduler.py, ``generator.builder.seam``), before anything imports vLLM's own;
2. in mode ``upstream`` leaves vLLM's classes alone; in every other mode rebinds
   ``vllm.v1.core.sched.scheduler.Scheduler`` and ``...async_scheduler.AsyncScheduler`` (the names the test
   files import, and ``create_scheduler()`` picks from) to subclasses of the runtime's own
   ``BalanceScheduler`` / ``BalanceAsyncScheduler`` (``vllm_ascend.patch.platform.patch_balance_schedule``:
   the generated copy, or the seam override where the scheduler has the seam, plus the tripwire);
   balance is switched by the runtime's own configuration (``init_ascend_config``), and each scheduler is
   given the leader's count a gather would give it: 0 (``gate-open``: no rank at cap) or the cap its gate
   compares with (``gate-closed``: the leader at cap, so no rank admits; the negative control);
3. records every ``schedule()`` output (``record.serialize``) of every scheduler built (upstream's
   ``Scheduler.__init__`` is wrapped in place, so vLLM's own subclasses are recorded too) and the class that
   produced it, per test, and writes them as JSON to ``BALANCE_UPSTREAM_RECORD`` at the end of the session;
4. provides the fixtures of their tests/conftest.py that these tests use (``caplog_vllm``), written here;
5. where the CPU platform refuses to configure on x86 without Triton (vLLM 0.34.0 on: triton-cpu is a GitHub
   release wheel, not on the package index) and no ``triton`` is importable, answers that one check: the
   scheduler tests build configs, never a kernel (``answer_triton_check``; the record says so).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import logging
import os
import re
import sys
from collections.abc import Generator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from balance_dev.upstream_tests import record

MODE_ENV = "BALANCE_UPSTREAM_MODE"
RECORD_ENV = "BALANCE_UPSTREAM_RECORD"
SCHEDULER_PY_ENV = "BALANCE_UPSTREAM_SCHEDULER_PY"
MODES = ("upstream", "gate-open", "balance-off", "gate-closed")
# The gate in the generated schedule(): `if self.balance_leader_running <op> self.<cap>:` (delta 2).
_GATE = re.compile(r"self\.balance_leader_running\s*(==|>=|>)\s*self\.(\w+)")


# Outputs kept per test; past this, calls are only counted (with the gate closed one test schedules forever,
# until its timeout: half a million calls).
MAX_RECORDED = 2000


def class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class Recorder:
    def __init__(self) -> None:
        self.test = "(collection)"
        self.outputs: dict[str, list[Any]] = {}
        self.calls: dict[str, int] = {}
        self.classes: dict[str, list[str]] = {}
        self.lineage: dict[str, list[str]] = {}  # each scheduler class seen -> its MRO, by name
        self.outcomes: dict[str, str] = {}
        self.details: dict[str, str] = {}

    def attach(self, scheduler: Any) -> None:
        """Record ``scheduler.schedule()``, the outermost one: the instance's own attribute shadows the class's,
        so a subclass's override (vLLM's DiffusionScheduler, say) is what is recorded, and ``super().schedule()``
        inside it is not recorded a second time."""
        schedule = scheduler.schedule

        @functools.wraps(schedule)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            output = schedule(*args, **kwargs)
            self.keep(scheduler, output)
            return output

        scheduler.schedule = recorded

    def keep(self, scheduler: Any, output: Any) -> None:
        calls = self.calls[self.test] = self.calls.get(self.test, 0) + 1
        if calls <= MAX_RECORDED:
            self.outputs.setdefault(self.test, []).append(record.serialize(output))
        cls = type(scheduler)
        name = class_name(cls)
        if name not in (seen := self.classes.setdefault(self.test, [])):
            seen.append(name)
        self.lineage.setdefault(name, [class_name(c) for c in cls.__mro__])


def record_every_scheduler(upstream: Any) -> None:
    """Wrap upstream ``Scheduler.__init__`` in place: every scheduler built from here on, whatever its class
    (upstream's, the balance ones over it, vLLM's own subclasses), records its ``schedule()`` outputs."""
    if getattr(upstream.__init__, "__balance_recording__", False):
        return
    init = upstream.__init__

    @functools.wraps(init)
    def recording_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        RECORDER.attach(self)

    recording_init.__balance_recording__ = True  # type: ignore[attr-defined]
    upstream.__init__ = recording_init


RECORDER = Recorder()


def mode() -> str:
    value = os.environ.get(MODE_ENV, "upstream")
    if value not in MODES:
        raise pytest.UsageError(f"{MODE_ENV}={value!r}: use one of {', '.join(MODES)}")
    return value


@functools.cache
def gate_of(chosen: Any) -> tuple[str, str] | None:
    """(operator, cap attribute) of the gate in ``chosen.schedule``; None for the seam's override."""
    from vllm_ascend.core.seam_balance_scheduler import SeamBalanceScheduler

    if issubclass(chosen, SeamBalanceScheduler):
        return None
    found = _GATE.search(inspect.getsource(chosen.schedule))
    if found is None:
        raise RuntimeError(f"no `self.balance_leader_running <op> self.<cap>` gate in {chosen.__qualname__}.schedule")
    return found.group(1), found.group(2)


def closed_leader(scheduler: Any, chosen: Any) -> int:
    """The leader's count that closes the gate of ``chosen``: its cap (the seam's override: any rank stopped)."""
    if (gate := gate_of(chosen)) is None:
        return 1  # each rank sends its own verdict (0/1); the gate closes when any rank's is 1
    operator, cap_name = gate
    cap = int(getattr(scheduler, cap_name))
    return cap + 1 if operator == ">" else cap


def answer_triton_check(platform: Any = None) -> str | None:
    """Let the CPU platform's configuration (``platform``: vLLM's ``CpuPlatform`` unless given) pass its Triton
    check, where it has one and Triton is absent.

    Only the check's own call sees Triton (``vllm.triton_utils.HAS_TRITON`` is True during the call and restored
    after it): the modules imported before, and everything the tests run after, see the placeholders vLLM uses
    without Triton. What was answered, for the record, or None where nothing needed it."""
    if importlib.util.find_spec("triton") is not None:
        return None
    if platform is None:
        from vllm.platforms.cpu import CpuPlatform as platform
    check = platform.check_and_update_config
    if getattr(check, "__balance_triton__", False) or "HAS_TRITON" not in inspect.getsource(check):
        return None
    import vllm.triton_utils as triton_utils

    original = check.__func__

    @functools.wraps(original)
    def check_and_update_config(cls: Any, vllm_config: Any) -> None:
        saved = triton_utils.HAS_TRITON
        triton_utils.HAS_TRITON = True
        try:
            original(cls, vllm_config)
        finally:
            triton_utils.HAS_TRITON = saved

    check_and_update_config.__balance_triton__ = True  # type: ignore[attr-defined]
    platform.check_and_update_config = classmethod(check_and_update_config)
    return f"{platform.__name__}.check_and_update_config's Triton check answered (no triton here; no kernel runs)"


def install(selected: str) -> dict[str, Any]:
    """Substitute (or not) the scheduler classes for ``selected``; what was installed, for the record."""
    if path := os.environ.get(SCHEDULER_PY_ENV):
        from balance_dev import seam_install

        seam_install.install_scheduler_module(path)
    import vllm.v1.core.sched.async_scheduler as async_module
    import vllm.v1.core.sched.scheduler as scheduler_module

    record_every_scheduler(scheduler_module.Scheduler)
    info: dict[str, Any] = {"mode": selected, "scheduler_py": path or None, "triton": answer_triton_check()}
    if selected == "upstream":
        info["classes"] = [class_name(scheduler_module.Scheduler), class_name(async_module.AsyncScheduler)]
        return info

    from vllm_ascend.ascend_config import init_ascend_config

    enabled = selected != "balance-off"
    init_ascend_config(SimpleNamespace(additional_config={"scheduler_config": {"enable_balance_scheduling": enabled}}))
    import vllm_ascend.patch.platform.patch_balance_schedule as patch

    chosen: Any = patch._ChosenScheduler
    closed = selected == "gate-closed"

    def subclass(base: Any, name: str) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            super(cls, self).__init__(*args, **kwargs)  # cooperative: vLLM's subclasses mix these in
            if enabled:
                # What a gather gives the scheduler (and what the tripwire looks for): the leader's count.
                self.balance_leader_running = closed_leader(self, chosen) if closed else 0

        __init__.__signature__ = inspect.signature(base.__init__)  # type: ignore[attr-defined]
        cls: Any = type(name, (base,), {"__init__": __init__, "__module__": __name__})
        return cls

    scheduler_module.Scheduler = subclass(patch.BalanceScheduler, "BalanceScheduler")  # type: ignore[misc]
    async_module.AsyncScheduler = subclass(patch.BalanceAsyncScheduler, "BalanceAsyncScheduler")  # type: ignore[misc]
    info |= {
        "chosen": class_name(chosen),
        "upstream_tag": getattr(chosen, "UPSTREAM_TAG", None),
        "classes": [class_name(scheduler_module.Scheduler), class_name(async_module.AsyncScheduler)],
    }
    return info


INSTALLED: dict[str, Any] = {}


@pytest.fixture
def caplog_vllm(caplog: pytest.LogCaptureFixture) -> Generator[pytest.LogCaptureFixture, None, None]:
    """pytest's caplog with vLLM's log records in it: the ``vllm`` logger prints through its own handler and
    does not propagate to the root logger caplog listens on, so propagation is on for the test, at INFO."""
    logger = logging.getLogger("vllm")
    propagate = logger.propagate
    logger.propagate = True
    try:
        with caplog.at_level(logging.INFO):
            yield caplog
    finally:
        logger.propagate = propagate


def pytest_configure(config: pytest.Config) -> None:
    if not INSTALLED:
        INSTALLED.update(install(mode()))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    RECORDER.test = item.nodeid
    RECORDER.outputs.setdefault(item.nodeid, [])
    try:
        return (yield)
    finally:
        RECORDER.test = "(between tests)"


# Worse outcomes win when a test's phases disagree (a passing call whose teardown errors is an error).
_RANK = {"passed": 0, "xfailed": 1, "skipped": 1, "xpassed": 2, "failed": 3, "error": 4}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.passed and report.when != "call":
        return  # a passing setup or teardown says nothing about the test
    if report.passed:
        outcome = "xpassed" if hasattr(report, "wasxfail") else "passed"
    elif report.skipped:
        outcome = "xfailed" if hasattr(report, "wasxfail") else "skipped"
    else:
        outcome = "failed" if report.when == "call" else "error"
    if _RANK[outcome] >= _RANK[RECORDER.outcomes.get(report.nodeid, "passed")]:
        RECORDER.outcomes[report.nodeid] = outcome
        if not report.passed:
            RECORDER.details[report.nodeid] = first_line(report)


def first_line(report: pytest.TestReport) -> str:
    """The error's own line (``E   ...``), else the skip reason or the first line of the report."""
    text = report.longreprtext or ""
    if report.skipped and isinstance(report.longrepr, tuple):
        text = str(report.longrepr[2])
    lines = [line for line in text.splitlines() if line.strip()]
    found = next((line[1:].strip() for line in lines if line.startswith("E ")), lines[-1] if lines else "")
    return found[:300]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    target = os.environ.get(RECORD_ENV)
    if not target:
        return
    import vllm

    data = {
        **INSTALLED,
        "vllm": str(getattr(vllm, "__version__", "unknown")),
        "python": sys.version.split()[0],
        "exitstatus": int(exitstatus),
        "outcomes": RECORDER.outcomes,
        "details": RECORDER.details,
        "outputs": RECORDER.outputs,
        "calls": RECORDER.calls,
        "scheduler_classes": RECORDER.classes,
        "lineage": RECORDER.lineage,
    }
    Path(target).write_text(json.dumps(data, sort_keys=True) + "\n", encoding="utf-8")

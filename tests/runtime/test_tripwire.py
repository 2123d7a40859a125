"""The tripwire for launchers nobody wrapped: balance on, and no gather ever reaches the scheduler."""

from __future__ import annotations

from typing import Any

import pytest

from balance_dev.scenarios import build
from balance_dev.vllm_objects import fake_model_output, make_request
from vllm_ascend.core.balance_scheduler_base import UNGATHERED_RUNS_ALLOWED


def _step(scheduler: Any) -> None:
    out = scheduler.schedule()
    scheduler.update_from_output(out, fake_model_output(out, scheduler))


def _scheduler(patch_mod: Any, enabled: bool) -> Any:
    scheduler = build(patch_mod.BalanceScheduler, {"max_num_seqs": 4}, enabled)
    for i in range(6):
        scheduler.add_request(make_request(f"r{i}", 8, 50))
    return scheduler


def test_three_schedules_without_a_gather_then_the_next_one_refuses(patch_mod: Any) -> None:
    scheduler = _scheduler(patch_mod, True)
    for _ in range(UNGATHERED_RUNS_ALLOWED):
        _step(scheduler)
    assert UNGATHERED_RUNS_ALLOWED == 3
    with pytest.raises(patch_mod.BalanceNotActiveError) as info:
        scheduler.schedule()
    message = str(info.value)
    assert "no per-step gather reached the scheduler in 3 schedule() calls" in message
    assert "called directly" in message  # no engine core on the stack in this test
    assert "disable scheduler_config.enable_balance_scheduling" in message
    assert "\n" not in message


def test_the_refusal_names_the_engine_core_that_never_gathers(patch_mod: Any) -> None:
    # An engine core of a launcher nobody wrapped: upstream's DP engine core, stepping its scheduler.
    class UnwrappedLauncherCore(patch_mod._OriginalDPEngineCoreProc):  # type: ignore[misc, name-defined]
        def step_scheduler(self) -> None:
            _step(self.scheduler)

    engine: Any = object.__new__(UnwrappedLauncherCore)
    engine.scheduler = _scheduler(patch_mod, True)
    for _ in range(UNGATHERED_RUNS_ALLOWED):
        engine.step_scheduler()
    with pytest.raises(
        patch_mod.BalanceNotActiveError,
        match=r"engine core tests\.runtime\.test_tripwire\..*UnwrappedLauncherCore never runs balance_gather\(\)",
    ):
        engine.step_scheduler()


def test_a_real_gather_each_step_keeps_it_quiet(patch_mod: Any, gloo_world: Any) -> None:
    scheduler = _scheduler(patch_mod, True)
    scheduler.dp_group = gloo_world
    _step(scheduler)  # the busy loop schedules once before its first sync
    for _ in range(20):
        scheduler.balance_gather()
        _step(scheduler)
    assert scheduler.balance_leader_running == len(scheduler.running) > 0


def test_balance_off_never_trips(patch_mod: Any) -> None:
    scheduler = _scheduler(patch_mod, False)
    for _ in range(20):
        _step(scheduler)


def test_a_harness_that_sets_the_leader_count_stands_in_for_the_gather(patch_mod: Any) -> None:
    # How unit tests and simulators drive the gate: they give the scheduler the count a gather would.
    scheduler = _scheduler(patch_mod, True)
    scheduler.balance_leader_running = 0
    for _ in range(20):
        _step(scheduler)


def test_a_gather_without_a_group_does_not_count_as_one(patch_mod: Any) -> None:
    # The Ray failure mode: nothing injects the group, so balance_gather() has nothing to gather on.
    scheduler = _scheduler(patch_mod, True)
    for _ in range(UNGATHERED_RUNS_ALLOWED):
        scheduler.balance_gather()
        _step(scheduler)
    with pytest.raises(patch_mod.BalanceNotActiveError):
        scheduler.schedule()

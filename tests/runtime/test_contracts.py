"""The seed's behaviour contract (items 1-4) on real vLLM schedulers driven for many steps."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import vllm_ascend.core.balance_scheduler_base as base_mod
from balance_dev.scenarios import SCENARIOS, build, drive
from balance_dev.upstream_cap import SEAM_METHOD, gathered_leader_value, upstream_cap
from balance_dev.vllm_objects import (
    bare_dp_engine,
    fake_model_output,
    make_request,
    summarize,
)


@pytest.fixture(scope="session", params=["sync", "async"])
def pair(request: pytest.FixtureRequest, patch_mod: Any, upstream_scheduler_cls: type) -> tuple[type, type]:
    """(upstream class, balance class): vLLM picks AsyncScheduler when async scheduling is on."""
    if request.param == "sync":
        return upstream_scheduler_cls, patch_mod.BalanceScheduler
    import vllm.v1.core.sched.async_scheduler as async_mod

    upstream_async = async_mod._balance_original_async_scheduler
    assert upstream_async is not async_mod.AsyncScheduler  # the patch rebound the name vLLM imports
    return upstream_async, patch_mod.BalanceAsyncScheduler


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("enabled", [True, False], ids=["balance-on-gate-open", "balance-off"])
def test_contract2_same_outputs_as_upstream_step_after_step(
    name: str, enabled: bool, pair: tuple[type, type], upstream_scheduler_cls: type
) -> None:
    upstream_cls, balance_cls = pair
    knobs, script = SCENARIOS[name]
    upstream = list(map(summarize, drive(build(upstream_cls, knobs, None), script, 160)))
    balance = build(balance_cls, knobs, enabled)
    assert isinstance(balance, upstream_cls)
    if enabled:
        # Gate open: the leader is one below upstream's cap (the strongest "open" state).
        below = upstream_cap(upstream_scheduler_cls).cap(balance) - 1
        balance.balance_leader_running = gathered_leader_value(balance, upstream_scheduler_cls, below)
    ours = list(map(summarize, drive(balance, script, 160)))
    assert ours == upstream
    # The scenario did what its name says (the comparison is not vacuous).
    # Distinct ids: from 0.33 a preempted request comes back among the new ones.
    assert len({r[0] for s in upstream for r in s["new"]}) == len(script)
    assert upstream[-1]["tokens"] == {}
    if name == "preemption-small-kv":
        assert any(s["preempted"] for s in upstream)
    if name == "chunked-prefill":
        assert any(t == knobs["max_num_batched_tokens"] for s in upstream for t in s["tokens"].values())


def _running_then_waiting(balance_cls: type, upstream_cls: type, leader: int) -> tuple[Any, list[Any]]:
    scheduler = build(balance_cls, {"max_num_seqs": 4, "max_num_batched_tokens": 256}, True)
    for i in range(2):
        scheduler.add_request(make_request(f"run{i}", 8, 50))
    outputs = []
    out = scheduler.schedule()  # admits run0, run1 (gate open: queue all zero)
    scheduler.update_from_output(out, fake_model_output(out, scheduler))
    for i in range(3):
        scheduler.add_request(make_request(f"wait{i}", 8, 50))
    # What the previous step's gather left when the leader had `leader` slots taken.
    scheduler.balance_leader_running = gathered_leader_value(scheduler, upstream_cls, leader)
    for _ in range(3):
        out = scheduler.schedule()
        outputs.append(out)
        scheduler.update_from_output(out, fake_model_output(out, scheduler))
    return scheduler, outputs


def test_contract1_leader_at_cap_freezes_admission_but_running_requests_progress(
    pair: tuple[type, type], upstream_scheduler_cls: type
) -> None:
    cap = 4
    scheduler, outputs = _running_then_waiting(pair[1], upstream_scheduler_cls, leader=cap)
    for out in outputs:
        assert out.scheduled_new_reqs == []
        assert set(out.num_scheduled_tokens) == {"run0", "run1"}
    assert len(scheduler.waiting) == 3


@pytest.mark.parametrize("leader", [0, 3, 4, 5], ids=["idle", "one-below-cap", "at-cap", "above-cap"])
def test_contract1_frozen_exactly_when_upstreams_own_check_stops_the_leader(
    pair: tuple[type, type], upstream_scheduler_cls: type, leader: int
) -> None:
    # The oracle is upstream's check read from the installed vLLM (v0.24: `==`, so a leader above
    # the cap does not freeze; 0.25+: `>=`). One below the cap never freezes: no "catch up".
    scheduler, outputs = _running_then_waiting(pair[1], upstream_scheduler_cls, leader=leader)
    admitted = [r.req_id for out in outputs for r in out.scheduled_new_reqs]
    frozen = upstream_cap(upstream_scheduler_cls).stops(scheduler, leader)
    if leader <= 4:  # every release's check agrees below and at the cap
        assert frozen is (leader == 4)
    assert admitted == ([] if frozen else ["wait0", "wait1"])  # up to the local cap of 4


class _GroupMaxSpy:
    """Records each call of the gather's one collective (the log-depth maximum) and runs the real one."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, Any]] = []
        self._real = base_mod.group_max

    def __call__(self, value: int, group: Any, **kwargs: Any) -> int:
        self.calls.append((value, group))
        return self._real(value, group, **kwargs)


def _spy_on_collectives(monkeypatch: pytest.MonkeyPatch, *, forbid_others: bool = True) -> _GroupMaxSpy:
    """The gather's exchange, spied; with ``forbid_others``, any of gloo's own collectives fails the test."""
    spy = _GroupMaxSpy()
    monkeypatch.setattr(base_mod, "group_max", spy)
    for name in ("all_gather", "all_reduce", "all_gather_into_tensor", "broadcast") if forbid_others else ():

        def forbidden(*args: Any, _name: str = name, **kwargs: Any) -> None:
            raise AssertionError(f"the balance gather used torch.distributed.{_name}")

        monkeypatch.setattr(torch.distributed, name, forbidden)
    return spy


def test_contract3_one_exchange_of_upstreams_count_on_the_injected_group(
    pair: tuple[type, type], upstream_scheduler_cls: type, gloo_world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _spy_on_collectives(monkeypatch)
    scheduler = build(pair[1], {"max_num_seqs": 4}, True)
    scheduler.balance_gather()
    assert spy.calls == []  # no group injected yet: nothing to gather on
    scheduler.dp_group = gloo_world
    for i in range(3):
        scheduler.add_request(make_request(f"r{i}", 8, 5))
    out = scheduler.schedule()
    assert spy.calls == []  # never inside schedule()
    scheduler.update_from_output(out, fake_model_output(out, scheduler))
    scheduler.balance_gather()
    assert len(spy.calls) == 1
    payload, group = spy.calls[0]
    assert group is gloo_world
    # Upstream's cap count (v0.24: len(running); 0.25+: plus streaming slots, none here); on the
    # seam path the rank's own verdict for that count.
    count = len(scheduler.running) + getattr(scheduler, "num_waiting_for_streaming_input", 0)
    assert count == 3
    sent = gathered_leader_value(scheduler, upstream_scheduler_cls, count)
    assert payload == sent
    assert scheduler.balance_leader_running == sent  # the real exchange's maximum, kept for the gate


def test_contract3_engine_hook_injects_group_then_gathers_once_per_call(
    patch_mod: Any, gloo_world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _spy_on_collectives(monkeypatch, forbid_others=False)  # upstream's sync all-reduces
    # No model executor on this machine: the engines carry the state upstream's sync reads. The twin
    # runs upstream's own method, so its answers (which steps all-reduce) are the oracle.
    scheduler = build(patch_mod.BalanceScheduler, {"max_num_seqs": 4}, True)
    engine = bare_dp_engine(patch_mod.BalanceDPEngineCoreProc, gloo_world, scheduler)
    twin = bare_dp_engine(patch_mod._OriginalDPEngineCoreProc, gloo_world, scheduler)
    answers = []
    for step in range(1, 65):  # crosses at least two of upstream's periodic all-reduces
        answer = engine._has_global_unfinished_reqs(local_unfinished=False)
        assert answer is twin._has_global_unfinished_reqs(local_unfinished=False)
        answers.append(answer)
        assert len(spy.calls) == step  # one gather per call, whatever upstream's sync did
    assert answers.count(False) >= 2  # upstream's all-reduce ran (all idle: False) more than once
    assert engine.scheduler.dp_group is gloo_world


def test_contract4_disabled_is_upstream_verbatim(
    pair: tuple[type, type], upstream_scheduler_cls: type, gloo_world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream_cls, balance_cls = pair
    spy = _spy_on_collectives(monkeypatch)
    knobs, script = SCENARIOS["mixed-lengths-over-cap"]
    balance = build(balance_cls, knobs, False)
    assert not hasattr(balance, "balance_queue")
    balance.dp_group = gloo_world

    def gather(s: Any) -> None:
        s.balance_gather()

    ours = [summarize(o) for o in drive(balance, script, 80, before_step=gather)]
    upstream = [summarize(o) for o in drive(build(upstream_cls, knobs, None), script, 80)]
    assert ours == upstream
    assert spy.calls == []
    # And the delegation itself: the disabled path is upstream's schedule(), called once per step.
    calls: list[bool] = []
    real = upstream_scheduler_cls.schedule

    def spy(self: Any, throttle_prefills: bool = False) -> Any:
        calls.append(throttle_prefills)
        return real(self, throttle_prefills)

    monkeypatch.setattr(upstream_scheduler_cls, "schedule", spy)
    balance.schedule(throttle_prefills=True)
    assert calls == [True]


def test_the_runtime_took_the_path_the_installed_vllm_needs(patch_mod: Any, upstream_scheduler_cls: type) -> None:
    from vllm_ascend.core.seam_balance_scheduler import SeamBalanceScheduler

    seam = hasattr(upstream_scheduler_cls, SEAM_METHOD)
    chosen = patch_mod._ChosenScheduler
    assert patch_mod.BalanceScheduler.__bases__ == (chosen,)  # chosen + the tripwire, nothing else
    assert (chosen is SeamBalanceScheduler) is seam
    # The seam path imports no copy of schedule(): the method is upstream's own.
    assert ("schedule" in vars(chosen)) is not seam

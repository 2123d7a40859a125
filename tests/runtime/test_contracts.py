"""The seed's behaviour contract (items 1-4) on real vLLM schedulers driven for many steps."""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.distributed as dist

from balance_dev.upstream_cap import upstream_cap
from balance_dev.vllm_objects import (
    balance_config,
    fake_model_output,
    make_request,
    make_scheduler,
    make_vllm_config,
    summarize,
)

# (arrival step, request id, prompt length, max tokens)
Script = list[tuple[int, str, int, int]]


def _mixed(seed: int, n: int, max_prompt: int) -> Script:
    rng = random.Random(seed)
    return [(rng.randrange(0, 30), f"r{i}", rng.randrange(1, max_prompt), rng.randrange(1, 24)) for i in range(n)]


SCENARIOS: dict[str, tuple[dict[str, Any], Script]] = {
    # more waiting than max_num_seqs, mixed prompt lengths, requests finishing at different steps
    "mixed-lengths-over-cap": ({"max_num_seqs": 4, "max_num_batched_tokens": 256}, _mixed(1, 24, 200)),
    # prompts longer than the token budget: chunked prefill over several steps
    "chunked-prefill": ({"max_num_seqs": 6, "max_num_batched_tokens": 64}, _mixed(2, 16, 400)),
    # a KV pool too small for everyone: preemption and resumption
    "preemption-small-kv": ({"max_num_seqs": 8, "max_num_batched_tokens": 256, "num_blocks": 24}, _mixed(3, 20, 120)),
}


def _drive(
    scheduler: Any, script: Script, steps: int, before_step: Callable[[Any], None] | None = None
) -> Iterator[Any]:
    for step in range(steps):
        for arrival, req_id, prompt, max_tokens in script:
            if arrival == step:
                scheduler.add_request(make_request(req_id, prompt, max_tokens))
        if before_step:
            before_step(scheduler)
        out = scheduler.schedule()
        yield out
        scheduler.update_from_output(out, fake_model_output(out, scheduler))


@pytest.fixture(scope="session", params=["sync", "async"])
def pair(request: pytest.FixtureRequest, patch_mod: Any, upstream_scheduler_cls: type) -> tuple[type, type]:
    """(upstream class, balance class): vLLM picks AsyncScheduler when async scheduling is on."""
    if request.param == "sync":
        return upstream_scheduler_cls, patch_mod.BalanceScheduler
    import vllm.v1.core.sched.async_scheduler as async_mod

    upstream_async = async_mod._balance_original_async_scheduler
    assert upstream_async is not async_mod.AsyncScheduler  # the patch rebound the name vLLM imports
    return upstream_async, patch_mod.BalanceAsyncScheduler


def _build(cls: type, knobs: dict[str, Any], enabled: bool | None) -> Any:
    knobs = dict(knobs)
    num_blocks = knobs.pop("num_blocks", 1024)
    extra = balance_config(enabled) if enabled is not None else None
    return make_scheduler(cls, make_vllm_config(additional_config=extra, **knobs), num_blocks=num_blocks)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("enabled", [True, False], ids=["balance-on-gate-open", "balance-off"])
def test_contract2_same_outputs_as_upstream_step_after_step(
    name: str, enabled: bool, pair: tuple[type, type], upstream_scheduler_cls: type
) -> None:
    upstream_cls, balance_cls = pair
    knobs, script = SCENARIOS[name]
    upstream = list(map(summarize, _drive(_build(upstream_cls, knobs, None), script, 160)))
    balance = _build(balance_cls, knobs, enabled)
    assert isinstance(balance, upstream_cls)
    if enabled:
        # Gate open: the leader is one below upstream's cap (the strongest "open" state).
        balance.balance_leader_running = upstream_cap(upstream_scheduler_cls).cap(balance) - 1
    ours = list(map(summarize, _drive(balance, script, 160)))
    assert ours == upstream
    # The scenario did what its name says (the comparison is not vacuous).
    assert sum(len(s["new"]) for s in upstream) == len(script)
    assert upstream[-1]["tokens"] == {}
    if name == "preemption-small-kv":
        assert any(s["preempted"] for s in upstream)
    if name == "chunked-prefill":
        assert any(t == knobs["max_num_batched_tokens"] for s in upstream for t in s["tokens"].values())


def _running_then_waiting(balance_cls: type, leader: int) -> tuple[Any, list[Any]]:
    scheduler = _build(balance_cls, {"max_num_seqs": 4, "max_num_batched_tokens": 256}, True)
    for i in range(2):
        scheduler.add_request(make_request(f"run{i}", 8, 50))
    outputs = []
    out = scheduler.schedule()  # admits run0, run1 (gate open: queue all zero)
    scheduler.update_from_output(out, fake_model_output(out, scheduler))
    for i in range(3):
        scheduler.add_request(make_request(f"wait{i}", 8, 50))
    scheduler.balance_leader_running = leader  # what the previous step's gather left
    for _ in range(3):
        out = scheduler.schedule()
        outputs.append(out)
        scheduler.update_from_output(out, fake_model_output(out, scheduler))
    return scheduler, outputs


def test_contract1_leader_at_cap_freezes_admission_but_running_requests_progress(pair: tuple[type, type]) -> None:
    cap = 4
    scheduler, outputs = _running_then_waiting(pair[1], leader=cap)
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
    scheduler, outputs = _running_then_waiting(pair[1], leader=leader)
    admitted = [r.req_id for out in outputs for r in out.scheduled_new_reqs]
    frozen = upstream_cap(upstream_scheduler_cls).stops(scheduler, leader)
    if leader <= 4:  # every release's check agrees below and at the cap
        assert frozen is (leader == 4)
    assert admitted == ([] if frozen else ["wait0", "wait1"])  # up to the local cap of 4


@pytest.fixture(scope="module")
def gloo_world() -> Iterator[Any]:
    """A real single-process gloo group (the multi-process case is tests/runtime/test_dp_sim.py)."""
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
    try:
        yield dist.new_group([0], backend="gloo")
    finally:
        dist.destroy_process_group()


class _AllGatherSpy:
    def __init__(self) -> None:
        self.calls: list[tuple[list[torch.Tensor], torch.Tensor, Any]] = []
        self._real = dist.all_gather

    def __call__(self, tensor_list: list[torch.Tensor], tensor: torch.Tensor, group: Any = None, **kw: Any) -> Any:
        self.calls.append((tensor_list, tensor.clone(), group))
        return self._real(tensor_list, tensor, group=group, **kw)


def test_contract3_one_all_gather_of_upstreams_count_on_the_injected_group(
    pair: tuple[type, type], gloo_world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _AllGatherSpy()
    monkeypatch.setattr(torch.distributed, "all_gather", spy)
    scheduler = _build(pair[1], {"max_num_seqs": 4}, True)
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
    tensor_list, payload, group = spy.calls[0]
    assert group is gloo_world and tensor_list is scheduler.balance_queue
    # Upstream's cap count (v0.24: len(running); 0.25+: plus streaming slots, none here).
    assert payload.tolist() == [len(scheduler.running) + getattr(scheduler, "num_waiting_for_streaming_input", 0)]
    assert payload.tolist() == [3]
    assert [t.item() for t in scheduler.balance_queue] == [3]  # the real collective filled it
    assert scheduler.balance_leader_running == 3  # reduced once, here, not per admitted request


def test_contract3_engine_hook_injects_group_then_gathers_once_per_call(
    patch_mod: Any, gloo_world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _AllGatherSpy()
    monkeypatch.setattr(torch.distributed, "all_gather", spy)
    engine = object.__new__(patch_mod.BalanceDPEngineCoreProc)  # no model executor on this machine
    engine.step_counter, engine.pending_pause, engine.ignore_start_dp_wave = 0, False, False
    engine.dp_group = gloo_world
    engine.scheduler = _build(patch_mod.BalanceScheduler, {"max_num_seqs": 4}, True)
    for step in range(1, 65):  # crosses two of upstream's every-32-steps all-reduces
        assert engine._has_global_unfinished_reqs(local_unfinished=False) is (step % 32 != 0)
        assert len(spy.calls) == step
    assert engine.scheduler.dp_group is gloo_world


def test_contract4_disabled_is_upstream_verbatim(
    pair: tuple[type, type], upstream_scheduler_cls: type, gloo_world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream_cls, balance_cls = pair
    spy = _AllGatherSpy()
    monkeypatch.setattr(torch.distributed, "all_gather", spy)
    knobs, script = SCENARIOS["mixed-lengths-over-cap"]
    balance = _build(balance_cls, knobs, False)
    assert not hasattr(balance, "balance_queue")
    balance.dp_group = gloo_world

    def gather(s: Any) -> None:
        s.balance_gather()

    ours = [summarize(o) for o in _drive(balance, script, 80, before_step=gather)]
    upstream = [summarize(o) for o in _drive(_build(upstream_cls, knobs, None), script, 80)]
    assert ours == upstream
    assert spy.calls == []
    # And the delegation itself: the disabled path is upstream's schedule(), called once per step.
    calls: list[bool] = []
    real = upstream_scheduler_cls.schedule
    monkeypatch.setattr(upstream_scheduler_cls, "schedule", lambda self, tp=False: calls.append(tp) or real(self, tp))
    balance.schedule(throttle_prefills=True)
    assert calls == [True]

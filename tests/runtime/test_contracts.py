"""The seed's behaviour contract (items 1-4) on real vLLM schedulers driven for many steps."""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.distributed as dist

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


def _build(cls: type, knobs: dict[str, Any], enabled: bool | None) -> Any:
    knobs = dict(knobs)
    num_blocks = knobs.pop("num_blocks", 1024)
    extra = balance_config(enabled) if enabled is not None else None
    return make_scheduler(cls, make_vllm_config(additional_config=extra, **knobs), num_blocks=num_blocks)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("enabled", [True, False], ids=["balance-on-gate-open", "balance-off"])
def test_contract2_same_outputs_as_upstream_step_after_step(
    name: str, enabled: bool, patch_mod: Any, upstream_scheduler_cls: type
) -> None:
    knobs, script = SCENARIOS[name]
    upstream = list(map(summarize, _drive(_build(upstream_scheduler_cls, knobs, None), script, 160)))
    balance = _build(patch_mod.BalanceScheduler, knobs, enabled)
    if enabled:
        # Gate open: the leader is one below the cap (the strongest "open" state).
        cap = balance.max_num_running_reqs
        balance.balance_queue = [torch.tensor([cap - 1], dtype=torch.int), torch.tensor([0], dtype=torch.int)]
    ours = list(map(summarize, _drive(balance, script, 160)))
    assert ours == upstream
    # The scenario did what its name says (the comparison is not vacuous).
    assert sum(len(s["new"]) for s in upstream) == len(script)
    assert upstream[-1]["tokens"] == {}
    if name == "preemption-small-kv":
        assert any(s["preempted"] for s in upstream)
    if name == "chunked-prefill":
        assert any(t == knobs["max_num_batched_tokens"] for s in upstream for t in s["tokens"].values())


def _running_then_waiting(patch_mod: Any, leader: int) -> tuple[Any, list[Any]]:
    scheduler = _build(patch_mod.BalanceScheduler, {"max_num_seqs": 4, "max_num_batched_tokens": 256}, True)
    for i in range(2):
        scheduler.add_request(make_request(f"run{i}", 8, 50))
    outputs = []
    out = scheduler.schedule()  # admits run0, run1 (gate open: queue all zero)
    scheduler.update_from_output(out, fake_model_output(out, scheduler))
    for i in range(3):
        scheduler.add_request(make_request(f"wait{i}", 8, 50))
    scheduler.balance_queue = [torch.tensor([leader], dtype=torch.int), torch.tensor([len(scheduler.running)])]
    for _ in range(3):
        out = scheduler.schedule()
        outputs.append(out)
        scheduler.update_from_output(out, fake_model_output(out, scheduler))
    return scheduler, outputs


def test_contract1_leader_at_cap_freezes_admission_but_running_requests_progress(patch_mod: Any) -> None:
    cap = 4
    scheduler, outputs = _running_then_waiting(patch_mod, leader=cap)
    for out in outputs:
        assert out.scheduled_new_reqs == []
        assert set(out.num_scheduled_tokens) == {"run0", "run1"}
    assert len(scheduler.waiting) == 3


@pytest.mark.parametrize("leader", [0, 3, 5], ids=["idle", "one-below-cap", "above-cap"])
def test_contract1_admission_goes_on_unless_the_leader_equals_the_cap(patch_mod: Any, leader: int) -> None:
    # one below the cap: not frozen (no "catch up with the leader"); above: `==`, not `>=`.
    _, outputs = _running_then_waiting(patch_mod, leader=leader)
    admitted = [r.req_id for out in outputs for r in out.scheduled_new_reqs]
    assert admitted == ["wait0", "wait1"]  # up to the local cap of 4


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


def test_contract3_one_all_gather_of_len_running_on_the_injected_group(
    patch_mod: Any, gloo_world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _AllGatherSpy()
    monkeypatch.setattr(torch.distributed, "all_gather", spy)
    scheduler = _build(patch_mod.BalanceScheduler, {"max_num_seqs": 4}, True)
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
    assert payload.tolist() == [len(scheduler.running)] == [3]
    assert [t.item() for t in scheduler.balance_queue] == [3]  # the real collective filled it


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
    patch_mod: Any, upstream_scheduler_cls: type, gloo_world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _AllGatherSpy()
    monkeypatch.setattr(torch.distributed, "all_gather", spy)
    knobs, script = SCENARIOS["mixed-lengths-over-cap"]
    balance = _build(patch_mod.BalanceScheduler, knobs, False)
    assert not hasattr(balance, "balance_queue")
    balance.dp_group = gloo_world

    def gather(s: Any) -> None:
        s.balance_gather()

    ours = [summarize(o) for o in _drive(balance, script, 80, before_step=gather)]
    upstream = [summarize(o) for o in _drive(_build(upstream_scheduler_cls, knobs, None), script, 80)]
    assert ours == upstream
    assert spy.calls == []
    # And the delegation itself: the disabled path is upstream's schedule(), called once per step.
    calls: list[bool] = []
    real = upstream_scheduler_cls.schedule
    monkeypatch.setattr(upstream_scheduler_cls, "schedule", lambda self, tp=False: calls.append(tp) or real(self, tp))
    balance.schedule(throttle_prefills=True)
    assert calls == [True]

"""Request scripts and a step loop for driving real vLLM schedulers side by side (contracts, seam proof)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

from balance_dev.vllm_objects import balance_config, fake_model_output, make_request, make_scheduler, make_vllm_config

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


def drive(
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


def build(cls: type, knobs: dict[str, Any], enabled: bool | None) -> Any:
    knobs = dict(knobs)
    num_blocks = knobs.pop("num_blocks", 1024)
    extra = balance_config(enabled) if enabled is not None else None
    return make_scheduler(cls, make_vllm_config(additional_config=extra, **knobs), num_blocks=num_blocks)

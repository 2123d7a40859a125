"""Real vLLM objects on CPU, without weights or tokenizer: for tests, the DP simulation and benchmarks.

The model is a tiny Llama described by a ``config.json`` written to a folder; vLLM only reads its
shape. Everything else (configs, KV cache manager, requests, scheduler) is vLLM's own code.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# No hub, and a private cache for vLLM's model-inspection results.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CACHE_ROOT", str(Path(tempfile.gettempdir()) / "balance-patchgen-vllm-cache"))

import torch
from vllm.config import (
    CacheConfig,
    DeviceConfig,
    KVTransferConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request
from vllm.v1.structured_output import StructuredOutputManager

BLOCK_SIZE = 16
EOS_TOKEN_ID = 2
_TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "num_hidden_layers": 1,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "bos_token_id": 1,
    "eos_token_id": EOS_TOKEN_ID,
    "torch_dtype": "float32",
}

init_none_hash(sha256)
_BLOCK_HASHER = get_request_block_hasher(BLOCK_SIZE, sha256)


def tiny_model_dir(*, moe: bool = False) -> Path:
    """A config-only model; ``moe`` declares experts, which is what makes vLLM pick its DP-MoE engine core."""
    path = Path(os.environ["VLLM_CACHE_ROOT"]) / ("tiny-llama-moe" if moe else "tiny-llama")
    path.mkdir(parents=True, exist_ok=True)
    config = path / "config.json"
    if not config.exists():
        fields = {**_TINY_LLAMA, "num_local_experts": 4, "num_experts_per_tok": 2} if moe else _TINY_LLAMA
        config.write_text(json.dumps(fields, sort_keys=True))
    return path


def make_vllm_config(
    *,
    max_num_seqs: int = 8,
    max_num_batched_tokens: int = 256,
    additional_config: Mapping[str, Any] | None = None,
    data_parallel_size: int = 1,
    kv_transfer_config: KVTransferConfig | None = None,
    enable_prefix_caching: bool = False,
    moe: bool = False,
) -> VllmConfig:
    model_config = ModelConfig(
        model=str(tiny_model_dir(moe=moe)), skip_tokenizer_init=True, max_model_len=2048, dtype="float32"
    )
    return VllmConfig(
        model_config=model_config,
        cache_config=CacheConfig(block_size=BLOCK_SIZE, enable_prefix_caching=enable_prefix_caching),
        scheduler_config=SchedulerConfig(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=2048,
            enable_chunked_prefill=True,
            is_encoder_decoder=False,
        ),
        parallel_config=ParallelConfig(data_parallel_size=data_parallel_size),
        device_config=DeviceConfig(device="cpu"),
        kv_transfer_config=kv_transfer_config,
        additional_config=dict(additional_config or {}),
    )


def balance_config(enabled: bool) -> dict[str, Any]:
    return {"scheduler_config": {"enable_balance_scheduling": enabled}}


def make_scheduler(cls: type, vllm_config: VllmConfig, *, num_blocks: int = 1024) -> Any:
    vllm_config.cache_config.num_gpu_blocks = num_blocks
    kv_cache_config = KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[
            KVCacheGroupSpec(
                ["layer"], FullAttentionSpec(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float32)
            )
        ],
    )
    return cls(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        structured_output_manager=StructuredOutputManager(vllm_config),
        block_size=BLOCK_SIZE,
        log_stats=False,
    )


def make_request(request_id: str, prompt_len: int, max_tokens: int, *, first_token: int = 10) -> Request:
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=False)
    params.update_from_generation_config({}, EOS_TOKEN_ID)
    prompt = [first_token + (i % 500) for i in range(prompt_len)]
    return Request(
        request_id=request_id,
        prompt_token_ids=prompt,
        sampling_params=params,
        pooling_params=None,
        block_hasher=_BLOCK_HASHER,
    )


_HAS_ROW_INDEX = "req_id_to_index" in {f.name for f in dataclasses.fields(ModelRunnerOutput)}


def fake_model_output(out: SchedulerOutput, scheduler: Any, *, token: int = 100) -> ModelRunnerOutput:
    """One sampled token for each request that finished its prompt this step (what a model would do)."""
    req_ids = list(out.num_scheduled_tokens)
    # schedule() already advanced num_computed_tokens: a chunk still mid-prompt samples nothing.
    sampled = [
        [token] if scheduler.requests[r].num_computed_tokens >= scheduler.requests[r].num_prompt_tokens else []
        for r in req_ids
    ]
    # Up to 0.33 the output also maps each id to its row; 0.34 dropped the field (rows are req_ids' order).
    rows: dict[str, Any] = {"req_id_to_index": {r: i for i, r in enumerate(req_ids)}} if _HAS_ROW_INDEX else {}
    return ModelRunnerOutput(req_ids=req_ids, sampled_token_ids=sampled, **rows)


def summarize(out: Any) -> dict[str, Any]:
    """Everything in a SchedulerOutput that says who runs, resumes, is preempted, and with what."""
    cached = out.scheduled_cached_reqs
    return {
        "new": [(r.req_id, r.num_computed_tokens, r.block_ids) for r in out.scheduled_new_reqs],
        "cached": [dataclasses.asdict(cached)]
        if dataclasses.is_dataclass(cached) and not isinstance(cached, type)
        else [repr(cached)],
        "tokens": dict(out.num_scheduled_tokens),
        "total": out.total_num_scheduled_tokens,
        "spec": dict(out.scheduled_spec_decode_tokens),
        "encoder": dict(out.scheduled_encoder_inputs),
        "preempted": sorted(out.preempted_req_ids or ()),
        "finished": sorted(out.finished_req_ids),
        "kv_connector_metadata": out.kv_connector_metadata,
    }


def bare_dp_engine(engine_cls: type, group: Any, scheduler: Any) -> Any:
    """A DP engine core without model executor: the state upstream's ``__init__`` gives the busy loop's
    sync (step counter, wave, pause protocol), from 0.32 on the sync interval from the config, and from
    0.34 on whether fault tolerance is on."""
    engine: Any = object.__new__(engine_cls)
    engine.step_counter, engine.current_wave = 0, 0
    engine.pending_pause, engine.ignore_start_dp_wave, engine.engines_running = False, False, False
    engine.dp_group, engine.scheduler, engine.dp_rank = group, scheduler, 0
    engine.vllm_config = scheduler.vllm_config  # 0.33's _has_global_unfinished_reqs reads its parallel_config
    interval = getattr(scheduler.vllm_config.parallel_config, "dp_sync_interval", None)
    if interval is not None:
        engine.dp_sync_interval = interval
    # 0.34's sync reads whether fault tolerance is on (its __init__ takes it from the parallel config).
    engine.enable_fault_tolerance = bool(
        getattr(scheduler.vllm_config.parallel_config, "enable_fault_tolerance", False)
    )
    return engine

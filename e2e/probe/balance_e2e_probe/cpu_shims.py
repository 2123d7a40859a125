"""Gaps of vLLM's CPU build on the DP=2 MoE path, filled for the e2e only (never in ``vllm_ascend``).

1. ``all_gatherv`` / ``reduce_scatterv`` over gloo for ``CpuCommunicator``: a DP MoE forward calls them
   on the DP/EP groups and gets ``NotImplementedError`` (the CUDA communicator has them, the CPU one
   does not at 0.24). Same contract as the CUDA versions: ``all_gatherv`` concatenates each rank's
   ``sizes[r]`` rows along ``dim``; ``reduce_scatterv`` sums over ranks and returns this rank's
   ``sizes[rank]`` rows. A vLLM that defines them on the CPU communicator itself keeps its own.
2. (vLLM 0.24) On CPUs without AVX512 (no ``prepack_moe_weight`` kernel) the fused MoE falls back to
   a torch path whose SiLU entry instantiates ``SiluAndMul`` during the forward, outside any vLLM config
   context: ``AssertionError: Current vLLM config is not set`` at the first warm-up. The table's own
   comment says it means to use static methods; the entry is pointed at ``SiluAndMul.forward_native``
   (same math). Only an entry that does so is replaced (0.27.1's table no longer does; 0.32 has no
   such table).
"""

from __future__ import annotations

import importlib.util
import os

import torch
import torch.distributed as dist


def _all_gatherv(self, input_, dim: int = 0, sizes: list[int] | None = None):
    if isinstance(input_, (list, tuple)):
        return [_all_gatherv(self, t, dim, sizes) for t in input_]
    world = self.world_size
    if world == 1:
        return input_
    dim = dim + input_.dim() if dim < 0 else dim
    x = input_.movedim(dim, 0).contiguous()
    sizes = list(sizes) if sizes is not None else [x.shape[0]] * world
    assert len(sizes) == world and x.shape[0] == sizes[self.rank_in_group], (sizes, tuple(x.shape))
    padded = x.new_zeros((max(sizes), *x.shape[1:]))
    padded[: x.shape[0]] = x
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded, group=self.device_group)
    out = torch.cat([part[:n] for part, n in zip(parts, sizes, strict=True)])
    return out.movedim(0, dim).contiguous()


def _reduce_scatterv(self, input_, dim: int = -1, sizes: list[int] | None = None):
    world = self.world_size
    if world == 1:
        return input_
    dim = dim + input_.dim() if dim < 0 else dim
    # A float32 copy: the in-place all_reduce must not touch input_, and the sum is not rounded to bf16.
    x = input_.movedim(dim, 0).to(torch.float32, copy=True).contiguous()
    sizes = list(sizes) if sizes is not None else [x.shape[0] // world] * world
    assert len(sizes) == world and sum(sizes) == x.shape[0], (sizes, tuple(x.shape))
    dist.all_reduce(x, group=self.device_group)
    start = sum(sizes[: self.rank_in_group])
    out = x[start : start + sizes[self.rank_in_group]].to(input_.dtype)
    return out.movedim(0, dim).contiguous()


def install() -> list[str]:
    """Fills the gaps this vLLM has; returns what was filled (the e2e summary names it)."""
    from vllm.distributed.device_communicators.cpu_communicator import CpuCommunicator

    filled = []
    # 3. Ray DP places each rank on a Ray resource named by the platform's ray_device_key, which the CPU
    #    platform leaves empty ("No  found in Ray cluster."). Only the e2e's Ray topology asks for it, and
    #    only the front end reads it (the engine cores' own workers run on the mp executor).
    ray_key = os.environ.get("BALANCE_E2E_RAY_DEVICE_KEY")
    if ray_key:
        from vllm.platforms.cpu import CpuPlatform

        if not CpuPlatform.ray_device_key:
            CpuPlatform.ray_device_key = ray_key
            filled.append(f"Ray device key {ray_key!r}")
    missing = [name for name in ("all_gatherv", "reduce_scatterv") if name not in CpuCommunicator.__dict__]
    for name in missing:
        setattr(CpuCommunicator, name, _all_gatherv if name == "all_gatherv" else _reduce_scatterv)
    if missing:
        filled.append("gloo " + "/".join(missing))

    # The torch fallback with that table lives in fused_moe.cpu_fused_moe up to 0.27; 0.32 rebuilt the
    # CPU MoE path (fused_moe/experts/cpu_moe.py) without it, and without the gap.
    if importlib.util.find_spec("vllm.model_executor.layers.fused_moe.cpu_fused_moe") is None:
        return filled
    from vllm.model_executor.layers.activation import SiluAndMul
    from vllm.model_executor.layers.fused_moe import cpu_fused_moe

    table = getattr(cpu_fused_moe, "_CPU_MOE_ACT_FN", None)
    silu = getattr(getattr(cpu_fused_moe, "MoEActivation", None), "SILU", None)
    entry = table.get(silu) if table is not None else None
    # Only an entry that builds the CustomOp per call (a lambda naming SiluAndMul) is the gap.
    names = getattr(getattr(entry, "__code__", None), "co_names", ())
    if table is not None and entry is not None and "SiluAndMul" in names:
        table[silu] = SiluAndMul.forward_native
        filled.append("MoE SiLU")
    return filled

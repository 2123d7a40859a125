"""Writes the e2e's tiny models, random weights, bf16, no download and no tokenizer (the server runs
with ``--skip-tokenizer-init`` on prompt token ids). Deterministic: the same seed writes the same
weights. About 1 MB each.

- ``moe``: Qwen3-MoE, 4 experts top-2, hidden 64, head_dim 32: vLLM runs its DP engine core for it.
- ``dense``: Qwen3 of the same shape without experts: balance on must refuse to start with it.

    python e2e/make_model.py OUT_DIR [moe|dense]
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from transformers import PreTrainedModel, Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

VOCAB_SIZE = 512
# Any: the configs' keyword arguments are typed one by one, a shared dict of them is not.
SHAPE: dict[str, Any] = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,  # the CPU attention backend needs >= 32
    max_position_embeddings=512,
    tie_word_embeddings=False,
    bos_token_id=1,
    eos_token_id=2,
    dtype="bfloat16",
)


def write_model(out_dir: str, kind: str = "moe") -> None:
    torch.manual_seed(0)
    model: PreTrainedModel
    if kind == "moe":
        model = Qwen3MoeForCausalLM(
            Qwen3MoeConfig(**SHAPE, moe_intermediate_size=64, num_experts=4, num_experts_per_tok=2)
        )
    elif kind == "dense":
        model = Qwen3ForCausalLM(Qwen3Config(**SHAPE))
    else:
        raise SystemExit(f"make_model.py: unknown kind {kind!r}: moe or dense")
    # transformers types PreTrainedModel.to through a decorator whose stub drops the bound self.
    model.to(torch.bfloat16).save_pretrained(out_dir)  # type: ignore[arg-type]


if __name__ == "__main__":
    write_model(sys.argv[1], *sys.argv[2:3])

"""Writes the e2e's tiny MoE model: Qwen3-MoE, 4 experts top-2, hidden 64, head_dim 32, bf16, random weights.

No download and no tokenizer (the engine runs with ``skip_tokenizer_init`` on prompt token ids).
Deterministic: the same seed writes the same weights. About 1 MB.

    python e2e/make_model.py OUT_DIR
"""

from __future__ import annotations

import sys

import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

VOCAB_SIZE = 512


def write_model(out_dir: str) -> None:
    torch.manual_seed(0)
    config = Qwen3MoeConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,  # the CPU attention backend needs >= 32
        num_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        dtype="bfloat16",
    )
    model = Qwen3MoeForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out_dir)


if __name__ == "__main__":
    write_model(sys.argv[1])

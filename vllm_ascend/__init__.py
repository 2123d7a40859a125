"""The slice of vllm-ascend that carries balance scheduling (runtime side of balance-patchgen)."""

"""balance-patchgen: vllm-ascend's balance scheduler as a build product of vLLM's source."""

"""Patches vllm-ascend applies to vLLM, laid out as vllm-ascend lays them out (``patch/platform/``)."""

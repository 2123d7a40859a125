"""Generated code; see balance_scheduler.py. Shipped as ``vllm_ascend._generated``."""

"""vLLM general plugin (entry point ``vllm.general_plugins``): vLLM calls it in every process it starts."""


def register() -> None:
    import vllm_ascend.patch.platform.patch_balance_schedule  # noqa: F401  (installs on import)

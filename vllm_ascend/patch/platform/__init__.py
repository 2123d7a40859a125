"""Platform-level patches: ``patch_balance_schedule`` installs balance scheduling into vLLM on import."""

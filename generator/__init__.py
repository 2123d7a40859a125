"""balance-patchgen: vllm-ascend's balance scheduler as a build product of vLLM's source."""

# The one place the version is written: pyproject.toml reads it (dynamic), --version prints it.
__version__ = "0.1.0"

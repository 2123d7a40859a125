"""Loggers inside vLLM's own logging tree.

vLLM configures one handler, on its ``vllm`` logger (level VLLM_LOGGING_LEVEL, vLLM's format, no
propagation to the root). A logger named ``vllm_ascend...`` sits outside that tree: at vLLM's default
settings nothing it logs reaches the server's output. Children of ``vllm`` print through vLLM's handler,
as vLLM's own lines do, in every process vLLM starts.
"""

from __future__ import annotations

import logging


def get_logger(module: str) -> logging.Logger:
    return logging.getLogger(f"vllm.{module}")


def refusal(logger: logging.Logger, error: Exception) -> Exception:
    """Log a start-up refusal as one vLLM line before it is raised (a traceback alone is not one)."""
    # stacklevel=2: vLLM's [file:line] names the caller that refuses, not this helper.
    logger.error("%s", error, stacklevel=2)
    return error

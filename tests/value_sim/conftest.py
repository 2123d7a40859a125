"""The value simulator builds real vLLM schedulers; no global AscendConfig may leak into them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vllm_ascend import ascend_config


@pytest.fixture(autouse=True)
def _no_global_ascend_config() -> Iterator[None]:
    ascend_config.clear_ascend_config()
    yield
    ascend_config.clear_ascend_config()

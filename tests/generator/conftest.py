"""Fixtures the generator's tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from balance_dev import package_index


@pytest.fixture
def local_index(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, bytes]]:
    """A PEP 691 index on loopback with range support, configured the way pip is (PIP_INDEX_URL).

    Maps a wheel's file name to its bytes; the test fills it (``package_index.wheel_bytes``).
    """
    files: dict[str, bytes] = {}
    with package_index.serve(files) as url:
        monkeypatch.setenv("PIP_INDEX_URL", url)
        yield files

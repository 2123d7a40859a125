"""Shared fixtures. Nothing here hard-codes the vLLM version: the pin file is the authority."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# torch imports setuptools, whose distutils override asserts when stdlib distutils was imported
# first (GitPython's and click's test helpers can do that). Keep the stdlib one, as Python 3.11 has it.
os.environ.setdefault("SETUPTOOLS_USE_DISTUTILS", "stdlib")

import pytest

from balance_dev import seam_install

# The seam-path run of the runtime contracts (tests/runtime/test_seam.py) points this at a
# scheduler.py carrying the upstream seam; it must be loaded before anything imports vLLM's.
if os.environ.get(seam_install.ENV):
    seam_install.install_scheduler_module(os.environ[seam_install.ENV])

from balance_dev.project_files import REPO_ROOT
from generator.pins.pin import PIN_FILE, read_pin
from generator.sources import installed, release
from generator.sources.base import UpstreamFile

# A released tag older than any pin this project will carry: the signature is still
# ``schedule(self)`` there, which exercises delta 1's forwarding on real upstream text.
OLDER_TAG = "v0.23.0"


@pytest.fixture(scope="session")
def pinned_tag() -> str:
    return read_pin(REPO_ROOT / PIN_FILE)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets an empty cache, so no test passes thanks to another's downloads."""
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("BALANCE_PATCHGEN_CACHE", str(cache))
    monkeypatch.delenv("VLLM_REPO", raising=False)
    return cache


@pytest.fixture(scope="session")
def upstream_pinned(pinned_tag: str) -> UpstreamFile:
    """Upstream at the pin, from the installed vLLM (CI installs exactly that version)."""
    return installed.fetch(pinned_tag)


@pytest.fixture(scope="session")
def upstream_v024() -> UpstreamFile:
    """v0.24.0 from the release artifact: cases about its shape (and the seed's gate) whatever the pin is."""
    upstream, _ = release.fetch("v0.24.0")
    return upstream


@pytest.fixture(scope="session")
def upstream_older() -> UpstreamFile:
    """Upstream at OLDER_TAG, from the release artifact on the configured package index."""
    upstream, _ = release.fetch(OLDER_TAG)
    return upstream


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the files the CLI reads and writes, to run it against with --root."""
    for rel in (PIN_FILE, Path("generated/balance_scheduler.py")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / rel, tmp_path / rel)
    return tmp_path

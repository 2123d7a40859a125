"""The runtime imports the generated module whose upstream scheduler.py is the installed one (pin or main-verified)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from balance_dev.project_files import REPO_ROOT
from vllm_ascend.core import scheduler_path, upstream_guard

PIN_MODULE = (REPO_ROOT / "generated/balance_scheduler.py").read_text()
MAIN_SHA = "f" * 64


@pytest.fixture
def generated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A generated package holding the pin's module and one for another vLLM (its header's sha256 changed)."""
    package = tmp_path / "refs_generated"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "balance_scheduler.py").write_text(PIN_MODULE)
    pin_sha = scheduler_path._SHA256.search(PIN_MODULE)
    assert pin_sha is not None
    main = PIN_MODULE.replace(pin_sha.group(1), MAIN_SHA)
    (package / "balance_scheduler_main_verified.py").write_text(main)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(scheduler_path, "GENERATED_PACKAGE", "refs_generated")
    yield package
    for name in [m for m in sys.modules if m.startswith("refs_generated")]:
        del sys.modules[name]


def test_the_module_matching_the_installed_scheduler_is_chosen(
    generated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert set(scheduler_path.generated_modules().values()) == {
        upstream_guard.installed_scheduler_sha256(),
        MAIN_SHA,
    }
    pin = scheduler_path.generated_for_installed_vllm()
    assert upstream_guard.installed_scheduler_sha256() == pin.UPSTREAM_SHA256
    assert pin.__module__ == "refs_generated.balance_scheduler"
    monkeypatch.setattr(upstream_guard, "installed_scheduler_sha256", lambda: MAIN_SHA)
    main = scheduler_path.generated_for_installed_vllm()
    assert main.__module__ == "refs_generated.balance_scheduler_main_verified"
    assert main.UPSTREAM_SHA256 == MAIN_SHA


def test_no_match_falls_back_to_the_pins_module_whose_start_up_check_refuses(
    generated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upstream_guard, "installed_scheduler_sha256", lambda: "0" * 64)
    chosen = scheduler_path.generated_for_installed_vllm()
    assert chosen.__module__ == "refs_generated.balance_scheduler"
    with pytest.raises(upstream_guard.UpstreamMismatchError, match="was generated from vLLM"):
        upstream_guard.check_upstream_file(chosen.UPSTREAM_TAG, chosen.UPSTREAM_SHA256, allow=False)

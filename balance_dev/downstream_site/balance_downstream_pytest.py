"""Test-only pytest plugin of `make downstream`, copied into the downstream venv and loaded with ``-p``.

vllm-ascend's ``test_schedule_body_matches_pinned_release_tag`` compares its copy of ``schedule()`` with the
pinned release's by ``git show TAG:vllm/v1/core/sched/scheduler.py`` in a vLLM checkout, so it skips on a
vLLM installed from a wheel. At the end of the session this plugin makes that same comparison with their
own ``_schedule_body_ast``, taken from their test module as pytest imported it, against the installed
vLLM's scheduler.py instead: the pinned release's text when the installed vLLM is the pin and the file
matches the wheel's RECORD. The result goes to the JSON file named by $BALANCE_DOWNSTREAM_REPORT.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import os
import sys
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

REPORT_ENV = "BALANCE_DOWNSTREAM_REPORT"
THEIR_TEST = "tests/ut/patch/platform/test_patch_balance_schedule.py"
PIN_FILE = ".github/vllm-release-tag.commit"
UPSTREAM_MEMBER = "vllm/v1/core/sched/scheduler.py"


def _their_module(root: Path) -> ModuleType | None:
    # Found by file, not by name: the name depends on pytest's import mode and rootdir.
    target = (root / THEIR_TEST).resolve()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve() == target:
            return module
    return None


def _installed_upstream() -> tuple[str, str]:
    """(version, scheduler.py text) of the installed vLLM, the file held to the wheel's RECORD hash."""
    dist = metadata.distribution("vllm")
    entry = next((f for f in dist.files or () if f.as_posix() == UPSTREAM_MEMBER), None)
    if entry is None or entry.hash is None or entry.hash.mode != "sha256":
        raise RuntimeError(f"the installed vLLM's RECORD has no sha256 for {UPSTREAM_MEMBER}")
    data = Path(str(dist.locate_file(entry))).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    if digest != entry.hash.value:
        raise RuntimeError(f"the installed {UPSTREAM_MEMBER} does not match vLLM's RECORD: it was edited")
    return dist.version, data.decode()


def compare(root: Path) -> dict[str, Any]:
    module = _their_module(root)
    if module is None:
        return {"error": f"{THEIR_TEST} was not imported (did it fail to collect?)"}
    tag = (root / PIN_FILE).read_text(encoding="utf-8").strip()
    version, upstream_text = _installed_upstream()
    if version != tag.removeprefix("v"):
        return {"error": f"the installed vLLM is {version}, the tree pins {tag}: no upstream text for the pin"}
    body_ast = module._schedule_body_ast
    pinned = body_ast(upstream_text)
    return {
        "tag": tag,
        "vllm": version,
        "copy_is_pin": body_ast(inspect.getsource(module.BalanceScheduler.schedule)) == pinned,
        "installed_class_is_pin": body_ast(inspect.getsource(module._UpstreamScheduler.schedule)) == pinned,
    }


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    out = os.environ.get(REPORT_ENV)
    if not out:
        return
    try:
        report = compare(Path(str(session.config.rootpath)))
    except Exception as exc:  # the harness prints it; a crash here would hide the test results
        report = {"error": f"{type(exc).__name__}: {exc}"}
    Path(out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")

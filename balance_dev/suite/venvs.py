"""A suite venv: `make downstream`'s venv (vLLM on CPU torch, their requirements minus the NPU stack) plus
what their whole unit suite imports from their requirements-dev.txt, pytest-timeout and coverage.

The rest of requirements-dev.txt is left out, named here: lint and typing stubs, the evaluation and
serving stacks no unit test imports on CPU (lm-eval, sentence-transformers, ray, mindstudio-probe, xlite,
uc-manager), build tools (ninja). A test that needs one fails at both releases: theirs, reported.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeAlias

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from balance_dev import downstream
from balance_dev.downstream import NICE, PIP, HarnessError, installed_versions, must, requirement_lines, say

SUITE_FORMAT = 1
# From their requirements-dev.txt, what tests/ut imports (their bounds are kept, read from the file).
FROM_DEV = ("pytest", "pytest-asyncio", "pytest-mock", "regex", "modelscope", "scipy", "coverage")
OURS = ("pytest-timeout", "coverage")  # the per-test timeout, the site coverage: change no outcome


def dev_requirements(tree: Path) -> list[str]:
    dev = tree / "requirements-dev.txt"
    found = {canonicalize_name(r.name): str(r) for r in requirement_lines(dev)} if dev.is_file() else {}
    return sorted({found.get(canonicalize_name(name), name) for name in (*FROM_DEV, *OURS)})


def pip_error(log: Path) -> str:
    """pip's own last ``ERROR:`` line in ``log`` (it names the package it could not install)."""
    text = log.read_text("utf-8", errors="replace") if log.is_file() else ""
    errors = [line.strip() for line in text.splitlines() if line.startswith(("ERROR:", "install-vllm: error"))]
    return errors[-1] if errors else "no pip error line"


# A project's base venv (vLLM ``vllm`` and its requirements: venv, vllm, tree, log) and its suite packages.
BaseVenv: TypeAlias = Callable[[Path, str, Path, Path], None]
DevPackages: TypeAlias = Callable[[Path], list[str]]


def ensure_suite_venv(
    venv: Path,
    vllm: str,
    tree: Path,
    log: Path,
    base: BaseVenv = downstream.ensure_venv,
    dev: DevPackages = dev_requirements,
) -> Path:
    """``venv`` ready for the suite at vLLM ``vllm``; a stamp keyed by the inputs skips it on reruns.
    ``base`` and ``dev``: another project's (projects.py); vllm-ascend's by default."""
    try:
        return _ensure(venv, vllm, tree, log, base, dev)
    except HarnessError as exc:
        raise HarnessError(f"{exc}: {pip_error(log)}", exc.code) from None


def _ensure(venv: Path, vllm: str, tree: Path, log: Path, base: BaseVenv, dev: DevPackages) -> Path:
    base(venv, vllm, tree, log)
    python = venv / "bin" / "python"
    packages = dev(tree)
    stamp = venv / ".suite-stamp"
    text = json.dumps({"format": SUITE_FORMAT, "vllm": vllm, "packages": packages}, sort_keys=True)
    if not (stamp.is_file() and stamp.read_text("utf-8") == text):
        started = time.monotonic()
        installed = installed_versions(python)
        constraints = venv / "suite-constraints.txt"
        asked = {canonicalize_name(Requirement(p).name) for p in packages}
        keep = {n: v for n, v in installed.items() if n not in asked}
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(keep.items())), encoding="utf-8")
        say(f"{venv.name}: installing {', '.join(packages)}")
        must([*NICE, str(python), *PIP, "-c", str(constraints), *packages], log, f"installing {' '.join(packages)}")
        stamp.write_text(text, encoding="utf-8")
        say(f"{venv.name}: suite packages in {time.monotonic() - started:.0f} s")
    site = Path(__file__).resolve().parent / "site"
    purelib = Path(downstream.venv_output(python, "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    for source in sorted(site.glob("*.py")):
        (purelib / source.name).write_bytes(source.read_bytes())
    if installed_versions(python).get("vllm") != vllm:
        raise HarnessError(f"{venv} holds vLLM {installed_versions(python).get('vllm')}, not {vllm}")
    return python

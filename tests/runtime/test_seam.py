"""Phase 2B: the upstream seam changes nothing upstream, and the runtime's seam path keeps contracts 1-5."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from balance_dev import seam_install
from balance_dev.project_files import REPO_ROOT
from balance_dev.scenarios import SCENARIOS, build, drive
from balance_dev.vllm_objects import summarize
from generator.builder import seam
from generator.sources.base import UPSTREAM_PATH, UpstreamFile


@pytest.fixture(scope="module")
def patched_file(upstream_pinned: UpstreamFile, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The installed release's scheduler.py with the seam diff applied by `git apply`, as a maintainer would."""
    made = seam.make_seam(upstream_pinned)
    root = tmp_path_factory.mktemp("vllm-checkout")
    target = root / UPSTREAM_PATH
    target.parent.mkdir(parents=True)
    target.write_bytes(upstream_pinned.data)
    (root / "seam.diff").write_text(made.diff)
    subprocess.run(["git", "apply", "--check", "seam.diff"], cwd=root, check=True, capture_output=True)
    subprocess.run(["patch", "-p1", "--dry-run", "-i", "seam.diff"], cwd=root, check=True, capture_output=True)
    subprocess.run(["git", "apply", "seam.diff"], cwd=root, check=True, capture_output=True)
    assert target.read_text() == made.patched != upstream_pinned.text
    return target


@pytest.fixture(scope="module")
def seam_scheduler_cls(patched_file: Path) -> type:
    """The patched upstream Scheduler, loaded beside vLLM's own under another module name."""
    spec = importlib.util.spec_from_file_location("balance_seam_upstream_scheduler", patched_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cls: type = module.Scheduler
    return cls


def test_the_seam_is_one_method_holding_upstreams_own_condition(
    seam_scheduler_cls: type, upstream_pinned: UpstreamFile
) -> None:
    made = seam.make_seam(upstream_pinned)
    assert f"return {made.condition}" in made.patched
    assert made.diff.count("\n+    def ") == 1  # one new method, nothing else defined
    # The loop asks the seam where it asked upstream's comparison: a break (to 0.33) or the loads_only flag.
    calls = [line for line in made.diff.splitlines() if line.startswith("+") and f"self.{seam.SEAM_METHOD}()" in line]
    assert len(calls) == 1
    assert calls[0].strip("+ ") in (f"if self.{seam.SEAM_METHOD}():", f"self.{seam.SEAM_METHOD}() or token_budget <= 0")
    assert hasattr(seam_scheduler_cls, seam.SEAM_METHOD)
    assert "behaviour: unchanged" in made.description.lower()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_patched_upstream_steps_exactly_like_upstream(
    name: str, seam_scheduler_cls: type, upstream_scheduler_cls: type
) -> None:
    knobs, script = SCENARIOS[name]
    upstream = [summarize(o) for o in drive(build(upstream_scheduler_cls, knobs, None), script, 160)]
    patched = [summarize(o) for o in drive(build(seam_scheduler_cls, knobs, None), script, 160)]
    assert patched == upstream
    assert len({r[0] for s in upstream for r in s["new"]}) == len(script)  # every request was admitted at some step


def test_the_seam_is_what_stops_admission(seam_scheduler_cls: type) -> None:
    # Not a dead method: overriding it to always stop freezes admission in the patched upstream.
    frozen_cls = type("Frozen", (seam_scheduler_cls,), {seam.SEAM_METHOD: lambda self: True})
    knobs, script = SCENARIOS["mixed-lengths-over-cap"]
    outputs = list(drive(build(frozen_cls, knobs, None), script, 20))
    assert all(o.scheduled_new_reqs == [] for o in outputs)


def test_contracts_1_to_5_hold_on_the_seam_path(patched_file: Path) -> None:
    """The runtime contract tests, in a process whose vLLM scheduler module is the patched file."""
    env = {**os.environ, seam_install.ENV: str(patched_file)}
    tests = ["tests/runtime/test_contracts.py", "tests/runtime/test_config.py"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    tail = result.stdout[-3000:]
    assert result.returncode == 0, tail
    passed = re.search(r"(\d+) passed", tail)
    assert passed is not None and int(passed.group(1)) >= 30, tail
    assert "skipped" not in tail and "failed" not in tail, tail


def test_the_seam_path_imports_no_copy(patched_file: Path) -> None:
    code = (
        "import sys\n"
        "from balance_dev.seam_install import install_scheduler_module\n"
        f"install_scheduler_module({str(patched_file)!r})\n"
        "import vllm_ascend.patch.platform.patch_balance_schedule as p\n"
        "from vllm_ascend.core.scheduler_path import schedule_origin\n"
        "print(schedule_origin(p.BalanceScheduler))\n"
        "print(p._ChosenScheduler.__name__, 'vllm_ascend._generated.balance_scheduler' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-2:] == ["SeamBalanceScheduler", "False"]
    # What the start-up line of each rank will say.
    assert "schedule() is upstream's own, gated through its _should_stop_admitting_waiting() seam" in result.stdout

"""What a run is and what it gives: the eight runs, one run in its own pytest process, and its record.

``RUNS`` are the modes the plugin substitutes (``plugin.py``), each with its role: ``reference`` (upstream's
own Scheduler), ``same`` (must equal the reference) or ``control`` (the gate held closed: must break).
``run_one`` runs the sdist's tests once for one of them against a prepared ``Setup`` (``environment.py``)
and reads the plugin's record back as a ``Result``; ``HarnessError`` is every set-up failure, with its exit code.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from balance_dev.upstream_tests import plugin, sdist

# The controls: with the gate closed a test that schedules until its requests finish loops forever
# (test_priority_scheduling_heap_property); a shorter timeout ends it sooner, and can only add failures.
CONTROL_TIMEOUT_S = 10
NICE = ("nice", "-n", "10")  # 2 shared cores: the test processes yield to other jobs


@dataclass(frozen=True)
class RunSpec:
    label: str
    mode: str  # the plugin's mode
    seam: bool  # vLLM's scheduler.py with the seam applied (generator.builder.seam)
    role: str  # "reference", "same" (must equal the reference) or "control" (must break)
    what: str


RUNS = (
    RunSpec("upstream", "upstream", False, "reference", "vLLM's Scheduler/AsyncScheduler"),
    RunSpec("gate-open", "gate-open", False, "same", "generated copy, balance on, gate held open"),
    RunSpec("balance-off", "balance-off", False, "same", "generated copy, balance off"),
    RunSpec("gate-closed", "gate-closed", False, "control", "generated copy, balance on, gate held closed"),
    RunSpec("seam-upstream", "upstream", True, "same", "vLLM's Scheduler with the seam applied"),
    RunSpec("seam-off", "balance-off", True, "same", "seam override, balance off"),
    RunSpec("seam-open", "gate-open", True, "same", "seam override, balance on, gate held open"),
    RunSpec("seam-closed", "gate-closed", True, "control", "seam override, balance on, gate held closed"),
)
RUN_LABELS = tuple(r.label for r in RUNS)


class HarnessError(Exception):
    def __init__(self, message: str, code: int = 4) -> None:
        super().__init__(message)
        self.code = code


say = sdist.say


@dataclass
class Result:
    spec: RunSpec
    data: dict[str, Any] = field(default_factory=dict)  # the plugin's record
    seconds: float = 0.0
    problem: str = ""  # the run gave no record
    log: str = ""

    @property
    def outcomes(self) -> dict[str, str]:
        return dict(self.data.get("outcomes", {}))

    @property
    def outputs(self) -> dict[str, list[Any]]:
        return dict(self.data.get("outputs", {}))

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    def calls(self) -> int:
        return sum(int(n) for n in self.data.get("calls", {}).values())

    def admitted(self) -> int:
        """Requests admitted over every recorded output (new ones; resumed ones are in the cached data)."""
        total = 0
        for outputs in self.outputs.values():
            for out in outputs:
                total += len(out.get("scheduled_new_reqs", []))
                resumed = out.get("scheduled_cached_reqs", {}).get("resumed_req_ids", {})
                total += len(resumed.get("set", [])) if isinstance(resumed, dict) else 0
        return total

    def classes(self) -> set[str]:
        return {c for names in self.data.get("scheduler_classes", {}).values() for c in names}

    def lineage(self, name: str) -> list[str]:
        """The class's MRO by name, as recorded (the class alone when the record has none)."""
        return list(self.data.get("lineage", {}).get(name, [name]))

    def balance_classes(self) -> set[str]:
        """The scheduler classes that ran with a balance class (the harness's or the runtime's) in their MRO."""
        ours = (f"{plugin.__name__}.", "vllm_ascend.")
        return {c for c in self.classes() if any(base.startswith(ours) for base in self.lineage(c))}

    def substituted_classes(self) -> set[str]:
        """The scheduler classes that ran over the harness's substitute (vLLM's own subclasses of it included)."""
        return {c for c in self.classes() if any(b.startswith(f"{plugin.__name__}.") for b in self.lineage(c))}


@dataclass(frozen=True)
class Setup:
    tag: str
    python: Path
    work: Path
    tree: sdist.Tree
    members: Mapping[str, bytes]
    env: dict[str, str]
    tests: tuple[str, ...]
    timeout: int
    seam_file: Path | None
    notes: tuple[str, ...]


def run_one(setup: Setup, spec: RunSpec) -> Result:
    result = Result(spec)
    out = setup.work / "runs" / f"{spec.label}.json"
    log = setup.work / "runs" / f"{spec.label}.log"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    result.log = str(log)
    sdist.check_tree(setup.tree, setup.members)
    env = dict(setup.env) | {plugin.MODE_ENV: spec.mode, plugin.RECORD_ENV: str(out)}
    if spec.seam:
        if setup.seam_file is None:
            result.problem = f"{setup.tag} already has the seam: no patched scheduler.py to run"
            return result
        env[plugin.SCHEDULER_PY_ENV] = str(setup.seam_file)
    cmd = [*NICE, str(setup.python), "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_timeout"]
    timeout = min(setup.timeout, CONTROL_TIMEOUT_S) if spec.role == "control" else setup.timeout
    cmd += ["-p", plugin.__name__, f"--timeout={timeout}", "-q", "-rN", "--tb=short", "--show-capture=no", *setup.tests]
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as handle:
        handle.write(f"$ {shlex.join(cmd)}\n")
        handle.flush()
        status = subprocess.run(
            cmd, cwd=setup.tree.root, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False
        ).returncode
    result.seconds = time.monotonic() - started
    if out.is_file():
        result.data = json.loads(out.read_text(encoding="utf-8"))
    if not result.data.get("outcomes"):
        result.problem = f"pytest exited {status} without test results: {last_error(log)} (see {log})"
    sdist.check_tree(setup.tree, setup.members)
    return result


def last_error(log: Path) -> str:
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    errors = [line for line in lines if line.startswith("E ") or "Error" in line]
    return (errors[0][2:].strip() if errors and errors[0].startswith("E ") else (errors or lines or [""])[-1])[:300]

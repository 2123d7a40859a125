"""One run of a plugin's whole CPU unit suite, the way its CI runs it, recorded by the suite plugin.

vllm-ascend's ``cpu-ut`` job (``.github/workflows/pr_test.yaml`` -> ``_selected_tests.yaml`` ->
``scripts/run_selected_tests.sh``) runs ``pytest -sv --color=yes tests/ut`` from the tree's root with the
environment below. Added here, none of which changes an outcome: ``-p balance_suite_pytest`` (records),
``-p no:cacheprovider`` (nothing written into the tree), pytest-timeout's per-test ``--timeout`` (a hang
fails that test and the run goes on), ``--color=no`` (a readable log), ``--continue-on-collection-errors``
(a module that does not import fails its own tests only; their CI stops there) and, at A, ``coverage run``
limited to the tree's own files (which coupling sites the tests execute). A peeled run at B (peel.py) adds
``-p balance_suite_peel`` and the stand-ins' file: that run alone is not their CI's, and says so.
Another project's CI step (projects.py) comes with its own environment and flags: ``CI``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from balance_dev.downstream import NICE, HarnessError, run_logged, say
from balance_dev.suite.outcomes import SuiteRun, conftest_error, read_records

# Their CI's container env and the step's (the Ascend toolkit's set_env.sh aside: no NPU here).
CI_ENV = {
    "VLLM_LOGGING_LEVEL": "ERROR",
    "VLLM_USE_MODELSCOPE": "True",
    "HF_HUB_OFFLINE": "1",
    "MAX_JOBS": "4",
    "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
    "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
}
CI_ARGS = ("-sv", "--color=no", "--continue-on-collection-errors")


@dataclass(frozen=True)
class CI:
    """A project's CI pytest step as the suite runs it: its environment, its flags (before the suite's own
    plugins and ``--timeout``), and the per-test timeout when ``--timeout`` is not given."""

    env: Mapping[str, str]
    args: tuple[str, ...]
    timeout: int


ASCEND = CI(CI_ENV, CI_ARGS, 120)  # vllm-ascend's cpu-ut job (their CI has no per-test timeout: ours)
RECORDS_ENV = "BALANCE_SUITE_RECORDS"
PEELS_ENV = "BALANCE_SUITE_PEELS"
SITE_DUMP = (
    "import json, sys\n"
    "from coverage import CoverageData\n"
    "data = CoverageData(sys.argv[1]); data.read()\n"
    "print(json.dumps({f: sorted(data.lines(f) or []) for f in sorted(data.measured_files())}))\n"
)


def suite_command(
    python: Path,
    tests: Sequence[str],
    timeout: int,
    coverage_file: Path | None,
    peels: Path | None = None,
    collect_only: bool = False,
    ci_args: Sequence[str] = CI_ARGS,
    junit: Path | None = None,
) -> list[str]:
    head = [str(python), "-m"]
    if coverage_file is not None:
        head += ["coverage", "run", f"--data-file={coverage_file}", "--source=.", "-m"]
    plugins = ["-p", "balance_suite_peel"] if peels is not None else []  # before their conftest: -p loads first
    # The JUnit XML their CI would write (``explain`` reads it): beside the records, never an outcome changed.
    report = [f"--junitxml={junit}"] if junit is not None and not collect_only else []
    return [*head, "pytest", *ci_args, *plugins, "-p", "balance_suite_pytest", "-p", "no:cacheprovider",
            f"--timeout={timeout}", *report, *(["--collect-only"] if collect_only else []), *tests]  # fmt: skip


def run_suite(
    label: str,
    python: Path,
    tree: Path,
    work: Path,
    tests: Sequence[str],
    timeout: int,
    coverage_file: Path | None = None,
    peels: Path | None = None,
    collect_only: bool = False,
    extra_env: Mapping[str, str] | None = None,
    ci: CI = ASCEND,
) -> SuiteRun:
    """pytest over ``tests`` in ``tree`` as ``ci`` runs it; ``peels``: with the stand-ins that file names
    (peel.py); ``extra_env``: only the suite's own tests set it (a fake vLLM on PYTHONPATH)."""
    records, log = work / f"{label}.records.jsonl", work / f"{label}.log"
    # the meta is written last: a run cut short leaves none, and --reuse-runs never takes its partial records
    meta_file = work / f"{label}.meta.json"
    for stale in (meta_file, records, log, *([coverage_file] if coverage_file else [])):
        stale.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS")}
    env |= dict(ci.env) | {RECORDS_ENV: str(records), "VLLM_CACHE_ROOT": str(work / "vllm-cache")}
    env |= ({PEELS_ENV: str(peels)} if peels is not None else {}) | dict(extra_env or {})
    junit = work / f"{label}.junit.xml"
    cmd = [*NICE, *suite_command(python, tests, timeout, coverage_file, peels, collect_only, ci.args, junit)]
    say(f"{label}: {' '.join(tests)} in {tree} (log: {log})")
    started = time.monotonic()
    status = run_logged(cmd, log, cwd=tree, env=env)
    run = read_run(records, log, tree)
    run.seconds = time.monotonic() - started
    run.status = status
    meta = {"seconds": run.seconds, "status": status, "command": cmd}
    meta_file.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    say(f"{label}: pytest exited {status} in {run.seconds:.0f} s: {run.counts()}")
    return run


def has_run(label: str, work: Path) -> bool:
    return (work / f"{label}.meta.json").is_file() and (work / f"{label}.log").is_file()


def reread(label: str, tree: Path, work: Path) -> SuiteRun:
    """A run made before (``--reuse-runs``): its records, log and meta from ``work``."""
    meta_file = work / f"{label}.meta.json"
    if not meta_file.is_file():
        raise HarnessError(f"no {meta_file}: run without --reuse-runs first", 2)
    meta = json.loads(meta_file.read_text("utf-8"))
    run = read_run(work / f"{label}.records.jsonl", work / f"{label}.log", tree)
    run.seconds, run.status = float(meta["seconds"]), int(meta["status"])
    return run


def read_run(records: Path, log: Path, tree: Path) -> SuiteRun:
    """The plugin's records; when there are none because a conftest did not import, that error (from the log)."""
    run = read_records(records)
    text = log.read_text("utf-8", errors="replace") if log.is_file() else ""
    if not run.tests and (stopped := conftest_error(text, str(tree.resolve()))) is not None:
        run.collect_errors[stopped.test] = stopped
    return run


def executed_lines(python: Path, coverage_file: Path, tree: Path) -> dict[str, set[int]]:
    """The tree's lines the run executed, by path relative to the tree (read by the venv's coverage)."""
    if not coverage_file.is_file():
        return {}
    text = subprocess.run(
        [str(python), "-c", SITE_DUMP, str(coverage_file)], capture_output=True, text=True, check=True
    ).stdout
    root = tree.resolve()
    out: dict[str, set[int]] = {}
    for name, lines in json.loads(text).items():
        try:
            out[Path(name).resolve().relative_to(root).as_posix()] = set(lines)
        except ValueError:
            continue
    return out

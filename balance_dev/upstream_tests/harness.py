"""`make upstream-tests`: vLLM's own scheduler tests, at the pinned release, judge every generated copy.

    python -m balance_dev.upstream_tests [--tag vX.Y.Z] [--python VENV/bin/python] [--work DIR]
        [--test tests/v1/core/test_scheduler.py ...] [--runs upstream,gate-open,...] [--timeout 30]
        [--markdown FILE] [--amend-plan PLAN.json]

1. vLLM's sdist of the tag (package index, sha256-checked, cached) gives the test files asked for and what
   they import from ``tests``, written to WORK/tree and checked byte-identical to the sdist before each run;
   their ``tests/conftest.py`` is replaced by this package's pytest plugin (``plugin.py``).
2. What the tests need, built offline next to the venv, never in it: an overlay of the library versions the
   release's own test lock pins (``overlay.py``; torchvision where the release's CPU requirements name it),
   a hub cache for the models the tests name (``hf_cache.py``), and a metadata-only
   ``vllm-VERSION+cpu.dist-info`` so that vLLM's own platform detection picks its CPU platform for a vLLM
   installed as ``vllm`` (``DeviceConfig("auto")`` fails otherwise).
3. The tests run once per run below, each in its own process (the classes are bound at import), with every
   ``schedule()`` output recorded. ``upstream`` is the reference; every ``same`` run must give the same
   outcome for every test and the same outputs, in the same order; every ``control`` run (the gate held
   closed) must break tests and admit no request, or the substitution is not live.

Exit codes: 0 clean; 1 a run is not (a test's outcome or outputs differ from upstream's, upstream's own
Scheduler fails, a control broke nothing); 2 usage; 4 setup failed (sdist, overlay, hub cache, venv).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from balance_dev.project_files import REPO_ROOT
from balance_dev.upstream_tests import overlay, sdist
from balance_dev.upstream_tests.environment import prepare
from balance_dev.upstream_tests.report import amend_plan, markdown, summary
from balance_dev.upstream_tests.runs import RUN_LABELS, RUNS, HarnessError, run_one, say
from balance_dev.upstream_tests.verdict import judge
from generator.errors import PatchgenError
from generator.pins.pin import PIN_FILE, read_pin
from generator.tags import validate_tag

DEFAULT_TESTS = ("tests/v1/core/test_scheduler.py", "tests/v1/core/test_async_scheduler.py")
DEFAULT_TIMEOUT_S = 30  # per test; the slowest at v0.24.0 takes 2 s


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m balance_dev.upstream_tests", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", help="vLLM release tag (default: the pin)")
    parser.add_argument(
        "--python", type=Path, default=REPO_ROOT / ".venv" / "bin" / "python", help="the venv under test"
    )
    parser.add_argument("--work", type=Path, help="work folder (default: build/upstream-tests/TAG)")
    parser.add_argument("--test", action="append", dest="tests", metavar="PATH", help="a test file of the sdist")
    parser.add_argument("--runs", default=",".join(RUN_LABELS), help="comma-separated (default: all: %(default)s)")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S, help="per test, seconds")
    parser.add_argument("--markdown", type=Path, help="also write the summary as markdown here")
    parser.add_argument("--amend-plan", type=Path, help="append the markdown summary to this bump plan's PR body")
    args = parser.parse_args(argv)
    try:
        args.tag = validate_tag(args.tag) if args.tag else read_pin(REPO_ROOT / PIN_FILE)
    except PatchgenError as exc:
        parser.error(str(exc))
    labels = [label.strip() for label in args.runs.split(",") if label.strip()]
    if unknown := [label for label in labels if label not in RUN_LABELS]:
        parser.error(f"unknown run(s) {', '.join(unknown)}: choose from {', '.join(RUN_LABELS)}")
    if "upstream" not in labels:
        parser.error("the upstream run is the reference every other run is compared with: keep it in --runs")
    args.runs = [r for r in RUNS if r.label in labels]
    args.tests = tuple(dict.fromkeys(args.tests or DEFAULT_TESTS))
    if bad := [t for t in args.tests if not (t.startswith("tests/") and t.endswith(".py")) or ".." in t]:
        parser.error(f"not a test file of the sdist's tests/ folder: {', '.join(bad)}")
    if args.timeout <= 0:
        parser.error("--timeout must be a positive number of seconds")
    args.work = (args.work or REPO_ROOT / "build" / "upstream-tests" / args.tag).absolute()
    args.python = args.python if args.python.is_absolute() else (Path.cwd() / args.python)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    try:
        setup = prepare(args)
    except (
        HarnessError,
        PatchgenError,
        sdist.SdistError,
        overlay.OverlayError,
        OSError,
        subprocess.CalledProcessError,
    ) as exc:
        say(f"error: {exc}")
        return exc.code if isinstance(exc, HarnessError) else 4
    results = []
    # A release with the seam of its own needs no patched file: its upstream run already is the seam's.
    for spec in [s for s in args.runs if not (s.seam and setup.seam_file is None)]:
        say(f"{spec.label}: {spec.what}")
        try:
            results.append(run_one(setup, spec))
        except sdist.SdistError as exc:
            say(f"error: {exc}")
            return 4
    # What the test processes' plugin had to answer for the platform (plugin.answer_triton_check) is the
    # environment's, so it is said beside the set-up's notes.
    answered = sorted({str(r.data["triton"]) for r in results if r.data.get("triton")})
    setup = replace(setup, notes=(*setup.notes, *answered))
    verdict = judge(results, setup.tag)
    text = summary(setup, results, verdict)
    print(text, flush=True)
    md = markdown(setup, results, verdict)
    report = {
        "tag": setup.tag,
        "tests": list(setup.tests),
        "notes": list(setup.notes),
        "seconds": round(time.monotonic() - started, 1),
        "runs": {
            r.spec.label: {
                "role": r.spec.role,
                "what": r.spec.what,
                "passed": r.count("passed"),
                "failed": r.count("failed"),
                "errors": r.count("error"),
                "skipped": r.count("skipped"),
                "schedule_calls": r.calls(),
                "admitted": r.admitted() if not r.problem else None,
                "seconds": round(r.seconds, 1),
                "problems": verdict.get(r.spec.label, []),
                "log": r.log,
            }
            for r in results
        },
        "clean": not any(verdict.values()),
    }
    (setup.work / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (setup.work / "summary.md").write_text(md, encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(md, encoding="utf-8")
    if args.amend_plan:
        try:
            amend_plan(args.amend_plan, md, clean=bool(report["clean"]))
        except (HarnessError, OSError, ValueError) as exc:
            say(f"error: {exc}")
            return 2
    say(f"{'clean' if report['clean'] else 'NOT clean'} ({report['seconds']:.0f} s; {setup.work}/report.json)")
    return 0 if report["clean"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""One run of the suite as the harness's pytest plugin recorded it (JSON lines), and a conftest that stopped it.

The run's records are the tool's (``generator.judge.explain.outcomes``): ``explain`` reads the same from a
plugin's JUnit XML; this reads what the harness's own plugin wrote beside it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from generator.judge.explain.outcomes import (
    BAD,
    Frame,
    Outcome,
    SuiteRun,
    _frames,
    bump_failures,
    collect_error_for,
    frames_in,
    module_of,
    theirs,
)

CONFTEST = re.compile(r"^\w+Error while loading conftest '(.+?)'")
__all__ = [
    "BAD",
    "Frame",
    "Outcome",
    "SuiteRun",
    "bump_failures",
    "collect_error_for",
    "conftest_error",
    "frames_in",
    "module_of",
    "read_records",
    "theirs",
]


def read_records(path: Path) -> SuiteRun:
    """The plugin's JSON lines; a test recorded twice (a rerun appended) keeps its last record."""
    run = SuiteRun()
    if not path.is_file():
        return run
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        frames = _frames(record.get("frames"))
        if "collect" in record:
            node = str(record["collect"])
            run.collect_errors[node] = Outcome(node, "error", str(record.get("error", "")), frames)
        else:
            test = str(record["test"])
            run.tests[test] = Outcome(
                test, str(record["outcome"]), str(record.get("error", "")), frames, float(record.get("seconds", 0))
            )
    return run


def conftest_error(log: str, root: str) -> Outcome | None:
    """A conftest that does not import stops pytest before any test: its error, keyed by its folder."""
    lines = log.splitlines()
    for number, line in enumerate(lines):
        if match := CONFTEST.match(line):
            folder = match[1].removeprefix(root.rstrip("/") + "/").rpartition("/")[0] + "/"
            rest = "\n".join(lines[number + 1 :])
            error = next((x[1:].strip() for x in rest.splitlines() if x.startswith("E   ")), line)[:300]
            return Outcome(folder, "error", error, frames_in(rest))
    return None

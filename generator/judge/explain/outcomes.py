"""One run of a plugin's suite (each test's outcome, first error line and traceback frames), and the bump's
failures between two runs (pure).

A test module that fails to collect has no tests in that run: a test the other run had in that module
counts as an ``error`` with the collection error's first line and frames (a bump that breaks an import
of a test module breaks every test in it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

BAD = ("failed", "error")
# pytest's traceback lines: "path:line: in function" (--tb=short; the suite plugin reads them the same way), and
# "path:line: " or "path:line: ErrorName" ending each entry (--tb=long, pytest's default)
FRAME_LINE = re.compile(r"^(\S+?\.py):(\d+): in (\S+)")
LONG_FRAME_LINE = re.compile(r"^(\S+?\.py):(\d+):(?: ([A-Za-z_][\w.]*))?\s*$")


@dataclass(frozen=True)
class Frame:
    path: str  # relative to the tree's root, or ``vllm/...`` for an installed package's file
    line: int
    function: str


@dataclass(frozen=True)
class Outcome:
    test: str
    outcome: str  # passed / failed / error / skipped
    error: str = ""  # first line of the exception (a skip's reason)
    frames: tuple[Frame, ...] = ()
    seconds: float = 0.0


@dataclass
class SuiteRun:
    tests: dict[str, Outcome] = field(default_factory=dict)
    collect_errors: dict[str, Outcome] = field(default_factory=dict)  # module nodeid -> its error
    seconds: float = 0.0
    status: int = 0  # pytest's exit code

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.tests.values() if o.outcome == outcome)

    def counts(self) -> dict[str, object]:
        return {
            "collected": len(self.tests),
            "passed": self.count("passed"),
            "failed": self.count("failed"),
            "errors": self.count("error") + len(self.collect_errors),
            "skipped": self.count("skipped"),
            "seconds": round(self.seconds),
        }

    def timeouts(self) -> list[str]:
        return sorted(t for t, o in self.tests.items() if o.outcome == "failed" and "Timeout" in o.error)


def _frames(raw: object) -> tuple[Frame, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(Frame(str(f[0]), int(f[1]), str(f[2])) for f in raw if isinstance(f, list) and len(f) == 3)


def frames_in(text: str) -> tuple[Frame, ...]:
    """The frames of pytest's short traceback text, an installed file's path cut to ``vllm/...``."""
    out = []
    for line in text.splitlines():
        if match := FRAME_LINE.match(line) or LONG_FRAME_LINE.match(line):
            path = match[1].rsplit("site-packages/", 1)[-1]
            out.append(Frame(path, int(match[2]), match[3] or ""))
    return tuple(out)


def module_of(test: str) -> str:
    return test.split("::", 1)[0]


def collect_error_for(run: SuiteRun, test: str) -> Outcome | None:
    """The collection error that kept ``test`` from running: its module's, or its folder's conftest's."""
    module = module_of(test)
    if (found := run.collect_errors.get(module)) is not None:
        return found
    folders = [k for k in run.collect_errors if k.endswith("/") and module.startswith(k)]
    return run.collect_errors[max(folders, key=len)] if folders else None


def bump_failures(at_from: SuiteRun, at_to: SuiteRun) -> list[Outcome]:
    """The tests that pass at A and fail or error at B (or whose module no longer collects at B), sorted."""
    out = []
    for test, before in sorted(at_from.tests.items()):
        if before.outcome != "passed":
            continue
        after = at_to.tests.get(test)
        if after is not None and after.outcome in BAD:
            out.append(after)
        elif after is None and (gone := collect_error_for(at_to, test)) is not None:
            out.append(Outcome(test, "error", gone.error, gone.frames))
    return out


def theirs(at_from: SuiteRun) -> list[Outcome]:
    """What fails already at A (the tree's own failures, not the bump's): tests, then collection errors."""
    bad = [o for _, o in sorted(at_from.tests.items()) if o.outcome in BAD]
    return bad + [o for _, o in sorted(at_from.collect_errors.items())]

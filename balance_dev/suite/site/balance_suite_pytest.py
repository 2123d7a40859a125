"""Test-only pytest plugin of `make downstream-suite`, copied into the suite's venvs and loaded with ``-p``.

It writes one JSON line per test and per collection error to the file named by $BALANCE_SUITE_RECORDS:
``{"test": nodeid, "outcome": passed|failed|error|skipped, "error": first line, "frames": [[path, line,
function], ...]}`` or ``{"collect": nodeid, "error": ..., "frames": ...}``. A test's frames are its
exception's traceback (and the chained exceptions'), innermost last, each path relative to the rootdir
when it lies under it, ``vllm/...`` (the part after ``site-packages/``) when it is an installed package's.
A collection error's frames come from the text pytest made of it (its short traceback). Nothing of the
run changes: outcomes are pytest's own reports, read, never altered. Only the standard library is used.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from types import TracebackType
from typing import Any

RECORDS_ENV = "BALANCE_SUITE_RECORDS"
MAX_CHAIN = 5  # chained exceptions followed (``raise ... from``, or raised while handling)
# "path:line: in function" (pytest's short style) or "path:line: ExcName" (the long style's last line)
FRAME_LINE = re.compile(r"^(\S+?\.py):(\d+): (?:in (\S+)|\w)")

_out: Any = None
_root = Path.cwd()
_frames: dict[tuple[str, str], list[list[object]]] = {}
_error: dict[tuple[str, str], str] = {}
_state: dict[str, dict[str, str]] = {}


def _path(filename: str) -> str:
    if "site-packages/" in filename:
        return filename.rsplit("site-packages/", 1)[1]
    try:
        return Path(filename).resolve().relative_to(_root).as_posix()
    except ValueError:
        return filename


def _chain(exc: BaseException | None) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and len(out) < MAX_CHAIN and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return out[::-1]  # the first raised first, as Python prints them


def _tb_frames(tb: TracebackType | None) -> list[list[object]]:
    out: list[list[object]] = []
    while tb is not None:
        code = tb.tb_frame.f_code
        out.append([_path(code.co_filename), tb.tb_lineno, code.co_name])
        tb = tb.tb_next
    return out


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}"[:300] if text else type(exc).__name__


def pytest_configure(config: Any) -> None:
    global _out, _root
    target = os.environ.get(RECORDS_ENV)
    if target:
        _root = Path(str(config.rootpath)).resolve()
        _out = open(target, "a", encoding="utf-8")  # noqa: SIM115 (closed at unconfigure)


def pytest_unconfigure(config: Any) -> None:
    global _out
    if _out is not None:
        _out.close()
        _out = None


def _write(record: dict[str, object]) -> None:
    if _out is not None:
        _out.write(json.dumps(record, sort_keys=True) + "\n")
        _out.flush()  # a run killed later keeps what it wrote


def pytest_runtest_makereport(item: Any, call: Any) -> None:
    if call.excinfo is None:
        return
    exc = call.excinfo.value
    frames: list[list[object]] = []
    for link in _chain(exc):
        frames += _tb_frames(link.__traceback__)
    _frames[(item.nodeid, call.when)] = frames
    _error[(item.nodeid, call.when)] = first_line(exc)


def pytest_runtest_logreport(report: Any) -> None:
    state = _state.setdefault(report.nodeid, {})
    state["seconds"] = str(float(state.get("seconds", "0")) + float(getattr(report, "duration", 0.0) or 0.0))
    key = (report.nodeid, report.when)
    if report.failed and "outcome" not in state:
        state["outcome"] = "failed" if report.when == "call" else "error"
        state["when"] = report.when
        state["error"] = _error.get(key) or _longrepr_line(report)
    elif report.skipped and "outcome" not in state:
        state["outcome"] = "skipped"
        state["error"] = _skip_reason(report)
    elif report.when == "call" and report.passed and "outcome" not in state:
        state["outcome"] = "passed"
    if report.when == "teardown":
        outcome = state.get("outcome", "passed")
        record: dict[str, object] = {"test": report.nodeid, "outcome": outcome}
        record["seconds"] = round(float(state.get("seconds", "0")), 3)
        if outcome in ("failed", "error", "skipped"):
            record["error"] = state.get("error", "")
        if outcome in ("failed", "error"):
            record["frames"] = _frames.get((report.nodeid, state.get("when", "call")), [])
        _write(record)
        _state.pop(report.nodeid, None)


def _longrepr_line(report: Any) -> str:
    text = str(report.longrepr or "")
    for line in text.splitlines():
        if line.startswith("E   "):
            return line[1:].strip()[:300]
    return next((line.strip() for line in text.splitlines() if line.strip()), "(no message)")[:300]


def _skip_reason(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])[:300]
    return str(getattr(report, "wasxfail", "") or "")[:300]


def pytest_collectreport(report: Any) -> None:
    if not report.failed:
        return
    text = str(report.longrepr or "")
    frames: list[list[object]] = []
    for line in text.splitlines():
        if match := FRAME_LINE.match(line):
            frames.append([_path(match[1]), int(match[2]), match[3] or ""])
    _write({"collect": report.nodeid, "error": _longrepr_line(report), "frames": frames})

"""A plugin's test run as its CI already writes it: pytest's JUnit XML (``--junitxml``), read into outcomes.

Each ``testcase`` is one test: passed, or its ``failure``/``error``/``skipped`` element, whose ``message`` is
the exception's first line and whose text is pytest's traceback (``--tb=short`` or longer: its
``path:line: in function`` lines are the frames). A module that did not collect is a ``testcase`` with no
``classname`` and the module as its ``name``: a collection error. pytest names a test by ``classname``
(the module's dotted path, then its classes) and ``name``; the test id written back is pytest's own
(``tests/ut/test_x.py::TestX::test_y[1]``), its module found as a file of the tree.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from generator.errors import UsageError
from generator.judge.explain.outcomes import Outcome, SuiteRun, frames_in

_BAD = {"failure": "failed", "error": "error"}


def read(path: Path, root: Path) -> tuple[SuiteRun, list[str]]:
    """The run ``path`` holds, its test ids as pytest's node ids in ``root``'s tree; and the test ids read
    whose module the tree does not have (counted and skipped: a results file of another tree has only those)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc}): pass pytest's --junitxml file") from None
    if not data.strip():
        raise UsageError(f"{path} is empty: pass the file pytest's --junitxml wrote")
    try:
        top = ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise UsageError(f"{path} is not XML ({exc}): pass the file pytest's --junitxml wrote") from None
    if top.tag not in ("testsuites", "testsuite"):
        raise UsageError(f"{path} is XML but not JUnit XML (its root is <{top.tag}>): pass pytest's --junitxml file")
    run = SuiteRun()
    strangers: list[str] = []
    for case in top.iter("testcase"):
        outcome = _outcome(case, root)
        if outcome is None:
            strangers.append(_dotted(case))
            continue
        if outcome.outcome == "error" and not case.get("classname"):  # a module that did not collect
            run.collect_errors[outcome.test] = outcome
        else:
            run.tests[outcome.test] = outcome
        run.seconds += outcome.seconds
    return run, strangers


def _dotted(case: ElementTree.Element) -> str:
    return ".".join(filter(None, [case.get("classname") or "", case.get("name") or ""]))


def _outcome(case: ElementTree.Element, root: Path) -> Outcome | None:
    classname, name = case.get("classname") or "", case.get("name") or ""
    node = node_id(classname, name, root, case.get("file"))
    if node is None:
        return None
    seconds = float(case.get("time") or 0)
    for child in case:
        if child.tag in _BAD:
            message = (child.get("message") or "").strip()
            text = child.text or ""
            error = _first_error(text) or _message_error(message)
            return Outcome(node, _BAD[child.tag], error[:300], frames_in(text), seconds)
        if child.tag == "skipped":
            return Outcome(node, "skipped", (child.get("message") or "")[:300], (), seconds)
    return Outcome(node, "passed", "", (), seconds)


# pytest's ``E`` line naming the exception: ``E   TypeError: ...``, indented further where the raise is (an
# ``E           AttributeError: ...`` under a frame of mock.py): a capitalized name, then ``: `` or nothing
# (its module, when pytest names one, dropped: ``pkg.errors.GoneAtB: ...`` is ``GoneAtB: ...``, as Python's
# ``type(e).__name__`` names it)
_RAISED = re.compile(r"^E\s+(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:: .*|:)?)$")
# what pytest's message says of a failure outside the test's call: ``failed on setup with "<the error>"``
_PHASE = re.compile(r'^failed on (?:setup|teardown) with "(.*)"$', re.DOTALL)


def _first_error(text: str) -> str:
    """pytest's ``E   TypeError: ...`` line (the exception as raised; a message may be cut or be a repr)."""
    for line in text.splitlines():
        if match := _RAISED.match(line):
            return match[1].strip()
    return ""


def _message_error(message: str) -> str:
    """The error a message names, without pytest's ``failed on setup with "..."`` around it."""
    if match := _PHASE.match(message):
        message = match[1]
    return (message.splitlines() or [""])[0]


def node_id(classname: str, name: str, root: Path, file: str | None = None) -> str | None:
    """pytest's node id of a test named ``classname`` and ``name`` in the tree at ``root``; None when the tree
    has no such module. A collection error names the module alone (no ``classname``)."""
    dotted = f"{classname}.{name}" if classname else name
    parts = dotted.split(".")
    if not classname:  # ``tests.ut.test_x`` (or pytest's path form ``tests/ut/test_x.py``)
        rel = name if name.endswith(".py") else "/".join(parts) + ".py"
        return rel if (root / rel).is_file() else None
    if file and (root / file).is_file():
        module_parts = file.removesuffix(".py").replace("/", ".").split(".")
        rest = parts[len(module_parts) :] if parts[: len(module_parts)] == module_parts else parts[-1:]
        return "::".join([file, *_rest(rest, name)])
    for cut in range(len(parts) - 1, 0, -1):
        rel = "/".join(parts[:cut]) + ".py"
        if (root / rel).is_file():
            return "::".join([rel, *_rest(parts[cut:], name)])
    return None


def _rest(parts: list[str], name: str) -> list[str]:
    """The classes and the test's own name after the module (a parametrized name keeps its ``[...]`` whole, dots
    and all: ``test_y[1.5]``)."""
    joined = ".".join(parts)
    if "[" in name and joined.endswith(name):
        head = joined[: -len(name)].rstrip(".")
        return [*(head.split(".") if head else []), name]
    return parts

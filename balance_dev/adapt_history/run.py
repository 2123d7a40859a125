"""The real trees: each pair's sdists unpacked fresh, ``impact`` and ``adapt`` run as the CLI, the results read.

Every tool run is a child process (``python -m generator``), timed, its peak memory read from the
kernel's accounting of that child (``os.wait4``); nothing of the tool is imported here but the
release reader, so the figures are the CLI's. A pair's A is the tree's pin (as ``impact`` reads it),
or the release the plugin's version names when the tree has no pin file.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from balance_dev import plugin_trees
from balance_dev.adapt_history import copies, names, signatures, statements
from balance_dev.project_files import REPO_ROOT
from generator.pins.pin import read_pin
from generator.sources import package
from generator.tree.layout import detect


@dataclass(frozen=True)
class Pair:
    project: str
    old: str  # P_A's version
    new: str | None  # P_B's version (None: no release to compare with, the reach check alone)
    to: str | None = None  # B when P_B does not name it


@dataclass
class Measured:
    code: int
    seconds: float
    peak_mb: float
    stdout: str
    stderr: str


def tool(args: Sequence[str]) -> Measured:
    """``python -m generator ARGS`` in a child process: its output, wall time and peak resident memory."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        child = subprocess.Popen([sys.executable, "-m", "generator", *args], stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.monotonic() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Measured(
            child.returncode,
            seconds,
            usage.ru_maxrss / 1024,  # KiB on Linux
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
        )


def _must(found: Measured, what: str) -> Measured:
    if found.code != 0:
        tail = [line for line in found.stderr.splitlines() if line.strip()][-1:] or ["(no output)"]
        raise RuntimeError(f"{what} exited {found.code}: {tail[0]}")
    return found


def release_of(tree: Path, version: str) -> tuple[str, str]:
    """The vLLM release a tree runs with: its pin file as ``impact`` reads it, else the one its version names."""
    pin = tree / detect(tree).pin
    return (read_pin(pin), "pin") if pin.is_file() else (f"v{version}", "version")


def unpack(project: str, version: str, dest: Path) -> Path:
    return plugin_trees.tree(project, version, dest)


def py_files(root: Path) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in Path(rel).parts):
            continue
        out[rel] = path.read_bytes().decode("utf-8", "replace")
    return out


def report_outcomes(stdout: str) -> dict[tuple[str, int], str]:
    """adapt's report lines: (file, line) of each copy it re-synced or left as a conflict."""
    out: dict[tuple[str, int], str] = {}
    for line in stdout.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "re-synced":
            site = words[1]
        elif len(words) >= 3 and words[:2] == ["left", "conflict"]:
            site = words[2]
        else:
            continue
        file, _, number = site.rpartition(":")
        if number.isdigit():
            out[(file, int(number))] = "re-synced" if words[0] == "re-synced" else "conflict"
    return out


def report_left(stdout: str) -> dict[str, str]:
    """adapt's report lines of what it left: each vLLM name with the first reason given for it (by site order)."""
    out: dict[str, str] = {}
    for line in stdout.splitlines():
        words = line.split(maxsplit=4)
        if len(words) == 5 and words[0] == "left" and words[3].endswith(":"):
            out.setdefault(words[3].rstrip(":"), f"left ({words[1]}): {words[4]}")
    return out


def _parsed(text: str | None) -> ast.Module | None:
    try:
        return None if text is None else ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _upstream_function(files: package.Package, where: dict[str, Any] | None) -> ast.AST | None:
    if not where or where.get("kind") != "function" or not where.get("lines"):
        return None
    tree = _parsed(files.text(where["path"]))
    found = None if tree is None else statements.at_line(tree, where["lines"][0])
    return None if found is None else found.node


def judge_pair(
    report: dict[str, Any],
    adapt_stdout: str,
    p_a: dict[str, str | None],
    p_b: dict[str, str | None] | None,
    adapted: dict[str, str | None],
    a: package.Package,
    b: package.Package,
) -> dict[str, Any]:
    """Names and copies of one pair, from impact's JSON of P_A, adapt's report and the three trees' files."""
    out: dict[str, Any] = {}
    if p_b is not None:
        rows = names.compare(p_a, p_a, p_b, adapted, a.text, b.text)
        out["names"] = {**names.counts(rows), "rows": [r.as_json() for r in rows]}
    reported = report_outcomes(adapt_stdout)
    copy_rows: list[copies.CopyRow] = []
    for coupling in report["couplings"]:
        if coupling["kind"] != "copy" or coupling["upstream"] not in report["symbols"]:
            continue
        symbol = report["symbols"][coupling["upstream"]]
        base, theirs = _upstream_function(a, symbol["from"]), _upstream_function(b, symbol["to"])
        file, _, line = coupling["site"].rpartition(":")
        trees = (_parsed(p_a.get(file)), _parsed((p_b or {}).get(file)), _parsed(adapted.get(file)))
        if base is None or theirs is None or trees[0] is None or trees[2] is None:
            continue
        row = copies.judge(
            copies.CopyInput(
                file,
                int(line),
                coupling["upstream"],
                base,
                theirs,
                trees[0],
                trees[1],
                trees[2],
                reported.get((file, int(line))),
                str(report.get("to") or ""),
            )
        )
        if row is not None:
            copy_rows.append(row)
    copy_rows.sort(key=lambda r: (r.file, r.qualname, r.upstream))
    if p_b is not None:
        followed = _signature_rows(report, p_a, p_b, adapted, a, b)
        out["signatures"] = {**signatures.summary(followed), "rows": [r.as_json() for r in followed]}
    if p_b is None:
        for row in copy_rows:
            row.maintainers, row.equal_to_maintainers = "-", None
    out["copies"] = {**copies.summary(copy_rows), "rows": [r.as_json() for r in copy_rows]}
    return out


def _signature_rows(
    report: dict[str, Any],
    p_a: dict[str, str | None],
    p_b: dict[str, str | None],
    adapted: dict[str, str | None],
    a: package.Package,
    b: package.Package,
) -> list[signatures.Row]:
    """Each override of the tree's code whose vLLM method B gave parameters: in P_A, P_B and adapt's tree."""
    out: list[signatures.Row] = []
    for coupling in report["couplings"]:
        symbol = report["symbols"].get(coupling["upstream"])
        if coupling["kind"] != "override" or symbol is None or coupling["site"].startswith("tests/"):
            continue
        if "signature" not in (symbol.get("parts") or ()):
            continue
        old, new = _upstream_function(a, symbol["from"]), _upstream_function(b, symbol["to"])
        file, _, line = coupling["site"].rpartition(":")
        tree_a = _parsed(p_a.get(file))
        if not isinstance(old, (ast.FunctionDef, ast.AsyncFunctionDef)) or tree_a is None:
            continue
        if not isinstance(new, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        qualname = _qualname_at(tree_a, int(line))
        if qualname is None:
            continue
        trees = (tree_a, _parsed(p_b.get(file)), _parsed(adapted.get(file)))
        row = signatures.judge(coupling["site"], coupling["upstream"], old, new, trees, qualname)
        if row is not None:
            out.append(row)
    return sorted(out, key=lambda r: r.site)


def _qualname_at(tree: ast.Module, line: int) -> str | None:
    """``Class.method`` of a top-level class's method whose ``def`` (or decorator) is on ``line``."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    first = min([item.lineno, *(d.lineno for d in item.decorator_list)])
                    if first <= line <= item.lineno:
                        return f"{node.name}.{item.name}"
    return None


def fresh(dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    return dest


def impact_json(tree: Path, old: str, new: str) -> tuple[dict[str, Any], Measured]:
    found = _must(tool(["--root", str(tree), "impact", "--from", old, "--to", new, "--format", "json"]), "impact")
    return json.loads(found.stdout), found

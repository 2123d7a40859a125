"""impact on vLLM plugins' published trees (their sdists on the index, cached), held to docs/impact.md and to an
independent reading of both releases' files.

Nothing of a plugin is kept here: each tree is fetched at test time. The figures docs/impact.md states
for each tree are read from its table and must be what the tool finds; and each coupling whose
definition stands at the same place in both releases must have the status this file's own reading
gives (stdlib ``ast``, docstrings aside), whatever the code under test says of it.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from balance_dev import plain_ast, plugin_trees
from balance_dev.project_files import REPO_ROOT
from generator.cli import main
from generator.sources import package

SCHEMA = json.loads((REPO_ROOT / "generator/judge/couplings/impact.schema.json").read_text())
DOC = REPO_ROOT / "docs/impact.md"
TO = "v0.33.0"  # fixed, not the newest: the figures must not move when vLLM releases again

# project, version, --from (None: the tree's own pin)
TREES = [
    ("vllm-ascend", "0.30.0rc2", None),
    ("tpu-inference", "0.32.0", "v0.32.0"),
    ("vllm-kunlun", "0.11.1", "v0.11.1"),
]
STATUSES = ("removed", "moved", "changed", "added", "redundant", "unresolved", "unchanged")


def _documented(project: str, version: str) -> dict[str, int]:
    """The counts docs/impact.md's table states for the tree, by status."""
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == f"{project} {version}":
            header = next(
                [c.strip() for c in row.strip().strip("|").split("|")]
                for row in DOC.read_text().splitlines()
                if row.startswith("| tree |")
            )
            return {s: int(re.sub(r"\D", "", cells[header.index(s)])) for s in STATUSES}
    raise AssertionError(f"docs/impact.md has no row for {project} {version}")


def _documented_verdicts(project: str, version: str) -> dict[str, int] | None:
    """The verdict counts docs/impact.md's verdict table states for the tree (None: no row for it)."""
    lines = DOC.read_text().splitlines()
    header = next(i for i, row in enumerate(lines) if row.startswith("| tree | from | to | breaks |"))
    for row in lines[header + 2 :]:
        if not row.startswith("|"):
            return None
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if cells[0] == f"{project} {version}":
            return {v: int(re.sub(r"\D", "", cells[3 + i])) for i, v in enumerate(("breaks", "review", "info"))}
    return None


def _module_and_qualname(files: package.Package, name: str) -> tuple[str, str] | None:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        path = files.module_path(".".join(parts[:i]))
        if path is not None:
            return path, ".".join(parts[i:])
    return None


@pytest.mark.network
@pytest.mark.parametrize(("project", "version", "old"), TREES, ids=[f"{p}-{v}" for p, v, _ in TREES])
def test_a_published_plugin_tree(project: str, version: str, old: str | None, tmp_path: Path) -> None:
    tree = plugin_trees.tree(project, version, tmp_path / "tree")
    args = ["impact", "--root", str(tree), "--to", TO, "--format", "json", *(["--from", old] if old else [])]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    assert report["counts"] == _documented(project, version)
    if (verdicts := _documented_verdicts(project, version)) is not None:
        assert report["verdicts"] == verdicts
    # Every coupling whose definition stands at the same place at both releases: its status is what the two
    # releases' own files say, read here.
    a, b = package.release(report["from"]), package.release(TO)
    parsed: dict[tuple[str, str], ast.Module] = {}

    def tree_of(files: package.Package, path: str) -> ast.Module:
        if (files.label, path) not in parsed:
            parsed[(files.label, path)] = ast.parse(files.text(path) or "")
        return parsed[(files.label, path)]

    checked = 0
    for coupling in report["couplings"]:
        if coupling["status"] not in ("unchanged", "changed") or not coupling["name"] or coupling["kind"] == "copy":
            continue
        where = _module_and_qualname(a, coupling["name"])
        if where is None or where[1] == "":
            continue
        path, qualname = where
        node_a = plain_ast.find(tree_of(a, path), qualname)
        node_b = plain_ast.find(tree_of(b, path), qualname) if b.text(path) is not None else None
        if node_a is None or node_b is None:
            continue
        symbol = report["symbols"].get(coupling["upstream"])
        if symbol is not None and symbol["to"] and symbol["to"]["name"] != coupling["name"]:
            continue  # B reaches it elsewhere (inherited now): not this reading's case
        expected = "unchanged" if plain_ast.plain(node_a) == plain_ast.plain(node_b) else "changed"
        assert coupling["status"] == expected, coupling
        checked += 1
    assert checked > 50, checked

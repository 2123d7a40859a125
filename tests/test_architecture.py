"""The whole repository by the generator's rules (docs/architecture.md), read from the source.

Every package and script folder (``generator/``, ``vllm_ascend/``, ``balance_dev/``, ``benchmarks/``,
``e2e/``, ``e2e/probe/``): no import circle, no module over 500 lines, every folder saying what it holds,
and each room importing only the rooms docs/architecture.md's table lets it. The reader is
``tests/import_graph.py``; ``tests/generator/test_architecture.py`` adds the generator's stage order.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from balance_dev.project_files import REPO_ROOT
from tests import import_graph
from tests.import_graph import MAX_LINES, PACKAGE_DOC_MIN, Root

ROOTS = (
    Root(REPO_ROOT, ("generator", "templates", "vllm_ascend", "balance_dev", "benchmarks")),
    Root(REPO_ROOT / "e2e"),  # `python e2e/run.py`: its folder is sys.path[0]
    Root(REPO_ROOT / "e2e" / "probe"),  # an installed distribution (balance-e2e-probe)
    Root(REPO_ROOT / "balance_dev" / "downstream_site"),  # put on the path of vllm-ascend's test processes
)
SCANNED = tuple(REPO_ROOT / f for f in ("generator", "templates", "vllm_ascend", "balance_dev", "benchmarks", "e2e"))
# The rooms, by folder (the longest that holds a module names its room).
ROOMS = {
    "generator": "tool",
    "templates": "tool",
    "vllm_ascend": "runtime",
    "balance_dev": "dev",
    "e2e": "e2e",
    "e2e/probe": "probe",
    "benchmarks": "benchmarks",
}
ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"

MODULES = import_graph.modules(ROOTS, SCANNED)
GRAPH = import_graph.graph(MODULES)


def room_of(path: Path, root: Path = REPO_ROOT) -> str:
    rel = path.relative_to(root).as_posix()
    folder = max((f for f in ROOMS if rel.startswith(f + "/")), key=len)
    return ROOMS[folder]


def allowed() -> dict[str, set[str]]:
    """docs/architecture.md's table of rooms: room -> the rooms it may import (its own always)."""
    text = ARCHITECTURE.read_text()
    section = text[text.index("\n## The rooms\n") :]
    table: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) >= 3 and (name := re.fullmatch(r"\*\*(\w+)\*\*", cells[0])):
            table[name.group(1)] = set(re.findall(r"\*\*(\w+)\*\*", cells[2]))
        elif table and not line.startswith("|"):
            break
    return table


def shown(module: str) -> str:
    return f"{module} ({MODULES[module].path.relative_to(REPO_ROOT)})"


def upward(edges: dict[str, list[str]], rules: dict[str, set[str]]) -> list[str]:
    """Every import from one room into a room its row does not name."""
    out = []
    for module, others in edges.items():
        mine = room_of(MODULES[module].path)
        for other in others:
            theirs = room_of(MODULES[other].path)
            if theirs != mine and theirs not in rules.get(mine, set()):
                out.append(f"{shown(module)} [{mine}] imports {shown(other)} [{theirs}]")
    return out


def test_no_import_cycle_in_the_repository() -> None:
    cycle = import_graph.find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(map(shown, cycle or []))


def test_the_graph_sees_every_folder_and_the_imports_across_them() -> None:
    # Not vacuous: the scripts' bare imports and the probe's are read (a reader that saw none would pass).
    assert {"run", "faults", "balance_e2e_probe.recorder", "balance_dev.upstream_tests.harness"} <= set(MODULES)
    assert "procs" in GRAPH["run"] and "balance_e2e_probe.counter" in GRAPH["benchmarks.serve"]
    assert {room_of(m.path) for m in MODULES.values()} == set(ROOMS.values())


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_the_line_limit(module: str) -> None:
    lines = import_graph.line_count(MODULES[module])
    assert lines <= MAX_LINES, f"{shown(module)}: {lines} lines"


@pytest.mark.parametrize("folder", [f.relative_to(REPO_ROOT).as_posix() for f in import_graph.folders(MODULES)])
def test_every_folder_says_what_it_holds(folder: str) -> None:
    doc = import_graph.package_doc(REPO_ROOT / folder)
    assert len(doc.strip()) >= PACKAGE_DOC_MIN, f"{folder}: no __init__.py docstring or README saying what it holds"


def test_the_rooms_table_names_every_room() -> None:
    assert set(allowed()) == set(ROOMS.values())


def test_each_room_imports_only_the_rooms_its_row_names() -> None:
    wrong = upward(GRAPH, allowed())
    assert not wrong, "imports the rooms table (docs/architecture.md) does not allow:\n" + "\n".join(wrong)


# -- the checker, shown to fail --------------------------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, import_graph.Module]:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    roots = (Root(tmp_path, ("pkg",)), Root(tmp_path / "scripts"))
    return import_graph.modules(roots, (tmp_path / "pkg", tmp_path / "scripts"))


def test_the_checker_names_a_planted_cycle_through_a_lazy_and_a_relative_import(tmp_path: Path) -> None:
    known = _tree(
        tmp_path,
        {
            "pkg/__init__.py": '"""A package."""\n',
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "def f():\n    from pkg.c import g\n",
            "pkg/c.py": "import pkg.a\n",
            "scripts/tool.py": "import helper\n",
            "scripts/helper.py": "import os\n",
        },
    )
    edges = import_graph.graph(known)
    assert edges["tool"] == ["helper"] and edges["helper"] == []
    cycle = import_graph.find_cycle(edges)
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"pkg.a", "pkg.b", "pkg.c"}
    (tmp_path / "pkg" / "c.py").write_text("import os\n")
    assert import_graph.find_cycle(import_graph.graph(known)) is None


def test_the_checker_finds_a_long_module_and_a_folder_that_says_nothing(tmp_path: Path) -> None:
    known = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/long.py": "x = 1\n" * (MAX_LINES + 1), "scripts/s.py": ""})
    assert import_graph.line_count(known["pkg.long"]) == MAX_LINES + 1
    assert import_graph.package_doc(tmp_path / "pkg") == ""
    assert import_graph.package_doc(tmp_path / "scripts") == ""
    (tmp_path / "scripts" / "README.md").write_text("The scripts, one a command.\n")
    assert import_graph.package_doc(tmp_path / "scripts").startswith("The scripts")


def test_the_checker_refuses_two_modules_of_one_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="two modules answer to one name: helper"):
        _tree(tmp_path, {"pkg/__init__.py": "", "scripts/helper.py": "", "scripts/helper/__init__.py": ""})


def test_the_room_rule_names_a_planted_upward_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GRAPH, "vllm_ascend.errors", [*GRAPH["vllm_ascend.errors"], "generator.errors"])
    wrong = upward(GRAPH, allowed())
    assert wrong == [
        "vllm_ascend.errors (vllm_ascend/errors.py) [runtime] imports generator.errors (generator/errors.py) [tool]"
    ]

"""The generator's folders are its stages and import one way (docs/architecture.md): read from the source.

Every ``import`` counts, a function's own too: a lazy import is still a dependency, and the circle
it closes is still a circle (the reader: ``tests/import_graph.py``). The 500-line limit, the folders'
docstrings and the rooms the generator may import are the whole repository's: ``tests/test_architecture.py``.
"""

from __future__ import annotations

import ast

import pytest

from balance_dev.project_files import REPO_ROOT
from tests import import_graph
from tests.import_graph import Root

PACKAGE = REPO_ROOT / "generator"
# Lowest first: a module may import its own stage and those before it, never one after it.
STAGES = ("shared", "sources", "builder", "judge", "pins", "tree", "cli")
MODULES = import_graph.modules([Root(REPO_ROOT, ("generator",))], [PACKAGE])
GRAPH = import_graph.graph(MODULES)


def _stage(module: str) -> str:
    parts = module.split(".")
    if module == "generator.__main__":
        return "cli"
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else "shared"


def _cycle() -> list[str] | None:
    return import_graph.find_cycle(GRAPH)


def test_no_import_cycle_inside_generator() -> None:
    cycle = _cycle()
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_names_a_planted_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GRAPH, "generator.errors", [*GRAPH["generator.errors"], "generator.builder.deltas"])
    cycle = _cycle()
    assert cycle is not None and cycle[0] == cycle[-1]
    assert "generator.errors" in cycle and "generator.builder.deltas" in cycle


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_run_from_the_cli_down_to_the_shared_modules(module: str) -> None:
    mine = STAGES.index(_stage(module))
    upward = [other for other in GRAPH[module] if STAGES.index(_stage(other)) > mine]
    assert not upward, f"{module} ({_stage(module)}) imports later stages: {upward}"


def test_every_stage_is_a_package_saying_what_it_may_import() -> None:
    for stage in STAGES[1:]:
        doc = ast.get_docstring(ast.parse((PACKAGE / stage / "__init__.py").read_text())) or ""
        lower = [s for s in STAGES[: STAGES.index(stage)] if s != "shared"]
        assert "May import" in doc or stage == "cli", stage
        assert all(f"generator.{s}" in doc for s in lower if stage != "cli"), (stage, lower)

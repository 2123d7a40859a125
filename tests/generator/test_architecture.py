"""The generator's folders are its stages and import one way (docs/architecture.md): read from the source.

Every ``import`` counts, a function's own too: a lazy import is still a dependency, and the circle
it closes is still a circle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from balance_dev.project_files import REPO_ROOT

PACKAGE = REPO_ROOT / "generator"
# Lowest first: a module may import its own stage and those before it, never one after it.
STAGES = ("shared", "sources", "builder", "judge", "pins", "tree", "cli")
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _stage(module: str) -> str:
    parts = module.split(".")
    if module == "generator.__main__":
        return "cli"
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else "shared"


def _imported(module: str, path: Path) -> Iterator[str]:
    """The generator modules ``module`` imports (``from p import m`` names module ``p.m`` when it is one)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *filter(None, [base])])
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                yield name


GRAPH = {module: sorted(set(_imported(module, path))) for module, path in MODULES.items()}


def _cycle() -> list[str] | None:
    """One import cycle (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for other in GRAPH[module]:
            if state.get(other) == 1:
                return [*path[path.index(other) :], other]
            if other not in state and (found := visit(other)) is not None:
                return found
        path.pop()
        state[module] = 2
        return None

    for module in GRAPH:
        if module not in state and (found := visit(module)) is not None:
            return found
    return None


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


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_the_line_limit(module: str) -> None:
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module}: {lines} lines"

"""The repository's modules and the imports between them, read from the source (the architecture tests' reader).

Every ``import`` counts, a function's own too: a lazy import is still a dependency, and the circle it
closes is still a circle. A module is named as the code that imports it names it, from the folder its
code runs with on ``sys.path``: the repository root for the packages, ``e2e/`` for the end-to-end scripts
(run as ``python e2e/run.py``), ``e2e/probe/`` for the probe (an installed distribution). Names no module
of the tree answers to (the standard library, vLLM, third parties) are not in the graph.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

MAX_LINES = 500
PACKAGE_DOC_MIN = 40  # characters: a sentence saying what a folder holds, not a placeholder


@dataclass(frozen=True)
class Root:
    """A folder on ``sys.path`` when its code runs, and the top-level names it gives (None: all it holds)."""

    folder: Path
    packages: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Module:
    name: str  # as its importers write it
    path: Path

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


def modules(roots: Iterable[Root], scanned: Iterable[Path]) -> dict[str, Module]:
    """Every ``.py`` file under the ``scanned`` folders, named from the deepest root that holds it."""
    ordered = sorted(roots, key=lambda r: len(r.folder.parts), reverse=True)
    out: dict[str, Module] = {}
    clashes = []
    for path in sorted({p for folder in scanned for p in folder.rglob("*.py")}):
        if "__pycache__" in path.parts:
            continue
        root = next(
            (
                r
                for r in ordered
                if path.is_relative_to(r.folder)
                and (r.packages is None or path.relative_to(r.folder).parts[0] in r.packages)
            ),
            None,
        )
        if root is None:
            raise ValueError(f"{path}: under no root")
        parts = path.relative_to(root.folder).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name in out:
            clashes.append(f"{name}: {out[name].path} and {path}")
        out[name] = Module(name, path)
    if clashes:
        raise ValueError("two modules answer to one name: " + "; ".join(clashes))
    return out


def imported(module: Module, known: Mapping[str, Module]) -> Iterator[str]:
    """The names in ``known`` that ``module`` imports (``from p import m`` names module ``p.m`` when it is one)."""
    tree = ast.parse(module.path.read_text(), filename=str(module.path))
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *filter(None, [base])])
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module.name:
                yield name


def graph(known: Mapping[str, Module]) -> dict[str, list[str]]:
    return {name: sorted(set(imported(module, known))) for name, module in known.items()}


def find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One import cycle (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for other in edges.get(module, ()):
            if state.get(other) == 1:
                return [*path[path.index(other) :], other]
            if other not in state and (found := visit(other)) is not None:
                return found
        path.pop()
        state[module] = 2
        return None

    for module in edges:
        if module not in state and (found := visit(module)) is not None:
            return found
    return None


def line_count(module: Module) -> int:
    return len(module.path.read_text().splitlines())


def package_doc(folder: Path) -> str:
    """What a folder says it holds: its ``__init__.py`` docstring, else its README."""
    init = folder / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) if init.is_file() else None
    if doc:
        return doc
    readme = next((p for p in sorted(folder.glob("README*")) if p.is_file()), None)
    return readme.read_text() if readme is not None else ""


def folders(known: Mapping[str, Module]) -> list[Path]:
    """Every folder holding a module."""
    return sorted({m.path.parent for m in known.values()})

"""The upstream index: the functions of one vLLM source tree big enough to be compared, by name."""

from __future__ import annotations

import ast
import importlib.util
import re
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from generator.errors import UsageError
from generator.judge.census.reading import MIN_MATCHED, Function, Skipped, functions, python_files


@dataclass(frozen=True)
class Source:
    """The vLLM tree the index is read from: its ``vllm`` package folder and the version, if known."""

    package: Path
    version: str | None
    origin: str  # "installed" or the path given


def vllm_source(path: Path | None = None) -> Source:
    """``path`` (the ``vllm`` package folder, or a folder holding it), else the interpreter's installed vLLM."""
    if path is None:
        spec = importlib.util.find_spec("vllm")  # finds the package without importing it
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if not locations:
            raise UsageError("no vLLM is installed in this interpreter: pass --vllm-source PATH (a vLLM source tree)")
        package = Path(locations[0])
        try:
            version: str | None = metadata.version("vllm")
        except metadata.PackageNotFoundError:
            version = None
        return Source(package, version, "installed")
    package = path / "vllm" if (path / "vllm" / "__init__.py").is_file() else path
    if not (package / "__init__.py").is_file() or package.name != "vllm":
        raise UsageError(
            f"--vllm-source {path} is neither vLLM's package folder (vllm/ with __init__.py) nor a folder holding it"
        )
    return Source(package, _version_in(package), str(path))


def _version_in(package: Path) -> str | None:
    """The version a vLLM source tree says it is: its dist-info beside it, else its ``_version.py``."""
    for info in sorted(package.parent.glob("vllm-*.dist-info")):
        try:
            return metadata.Distribution.at(info).version
        except (OSError, ValueError):
            continue
    version_file = package / "_version.py"
    if version_file.is_file():
        found = _VERSION_LINE.search(version_file.read_text(errors="replace"))
        if found is not None:
            return found[1]
    return None


# What vLLM's generated _version.py says: ``__version__ = version = '0.30.0'``.
_VERSION_LINE = re.compile(r"^__version__\s*=\s*(?:version\s*=\s*)?['\"](\d[^'\"]*)['\"]", re.M)


def defined_names(package: Path) -> set[str]:
    """Every name a ``def`` in the package's files gives (a superset: a ``def`` in a string counts too)."""
    names: set[str] = set()
    for file in python_files(package):
        try:
            names.update(m.decode("utf-8", errors="replace") for m in _DEF.findall(file.read_bytes()))
        except OSError:
            continue
    return names


_DEF = re.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)", re.M)


class UpstreamIndex:
    """The functions of one vLLM source tree big enough to be compared, by name, as statement keys."""

    def __init__(self, source: Source, names: Collection[str] | None = None) -> None:
        """Read ``source``; with ``names``, keep only functions so named (the ones a tree can match)."""
        self.source = source
        self.by_name: dict[str, list[Function]] = defaultdict(list)
        self.skipped: list[Skipped] = []
        self.files = 0
        root = source.package.parent
        for file in python_files(source.package):
            rel = file.relative_to(root).as_posix()
            try:
                tree = ast.parse(file.read_bytes(), filename=rel)
            except (OSError, SyntaxError, ValueError, RecursionError) as exc:
                self.skipped.append(Skipped(rel, type(exc).__name__))
                continue
            self.files += 1
            for func in functions(tree, rel):
                if func.size >= MIN_MATCHED and (names is None or func.name in names):
                    func.settle(True)
                    self.by_name[func.name].append(func)
        self._inverted: dict[str, Table] = {}
        self._everything: Table | None = None

    def candidates(self, name: str) -> list[Function]:
        return self.by_name.get(name, [])

    def inverted(self, name: str) -> Table:
        """For the functions named ``name`` big enough to match: statement key -> (function, times it has it)."""
        if name not in self._inverted:
            self._inverted[name] = _table(self.candidates(name))
        return self._inverted[name]

    def everything(self) -> Table:
        """The same for every function the index holds, whatever its name (``--renamed``)."""
        if self._everything is None:
            self._everything = _table(f for group in self.by_name.values() for f in group)
        return self._everything


# Statement key -> (function, times it has it), for the functions big enough to match.
Table = dict[int, list[tuple[Function, int]]]


def _table(funcs: Iterable[Function]) -> Table:
    table: Table = defaultdict(list)
    for func in funcs:
        if func.size >= MIN_MATCHED:
            for key, times in Counter(func.keys).items():
                table[key].append((func, times))
    return table

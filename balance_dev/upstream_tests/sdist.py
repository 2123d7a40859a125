"""vLLM's sdist of a release (its test suite rides along), cached, and the test files a run needs from it.

Nothing of it is copied into the project: the sdist is read from the package index pip is configured with,
held to the sha256 the index publishes, kept in the cache root, and the files a run needs are written to a
work folder, where ``check_tree`` proves before every run that each is still the sdist's member, byte for
byte. Which files: the test files asked for, every ``tests`` module they import (followed through the
imports of those), the packages' ``__init__.py`` files, the ``conftest.py`` files pytest loads for the test
files (not ``tests/conftest.py``: the harness's plugin replaces it), ``pyproject.toml`` (their pytest
markers) and ``requirements/`` (the release's own pins, read by ``overlay``).
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import shutil
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from generator.sources import cache, index

PROJECT = "vllm"
SDIST_TIMEOUT_S = 600.0  # ~40 MB in one read; the index module's 60 s default is sized for range reads
# Their root conftest imports much more than the scheduler tests need (models, engines, HF downloads): the
# harness's pytest plugin takes its place, so it is never written into the tree.
REPLACED = "tests/conftest.py"
MANIFEST = "sdist-files.json"  # in the tree: each file written from the sdist, with its sha256


class SdistError(Exception):
    """The sdist cannot be had or does not hold what the run needs; ``str()`` is the one line to print."""


def say(message: str) -> None:
    print(f"upstream-tests: {message}", flush=True)


def sdist_name(version: str) -> str:
    return f"{PROJECT}-{version}.tar.gz"


def sdist_bytes(version: str) -> bytes:
    """vLLM ``version``'s sdist, checked against the index's sha256 on download, then from the cache."""
    filename = sdist_name(version)
    path = cache.cache_root() / "vllm-sdist" / version / filename
    if (data := cache.load_at(path)) is not None:
        return data
    found = {f.filename: f for f in index.list_files(PROJECT)}.get(filename)
    if found is None:
        raise SdistError(f"the package index has no {filename}: is {version} a vLLM release with an sdist?")
    if found.sha256 is None:
        raise SdistError(f"the package index publishes no sha256 for {filename}: it cannot be checked")
    say(f"downloading {filename} ({(found.size or 0) / 1e6:.1f} MB)")
    deadline = index.Deadline.from_env() if os.environ.get(index.FETCH_TIMEOUT_ENV, "").strip() else None
    reader = index.RangeReader(found.url, found.size, deadline=deadline or index.Deadline(SDIST_TIMEOUT_S))
    data = reader.read()
    if hashlib.sha256(data).hexdigest() != found.sha256:
        raise SdistError(f"{filename} does not match the sha256 the package index publishes for it: retry")
    cache.store_at(path, data)
    return data


def wanted(path: str) -> bool:
    """The sdist members read into memory: test sources, the requirements, the pytest configuration."""
    return (
        (path.startswith("tests/") and path.endswith(".py"))
        or path.startswith("requirements/")
        or (path == "pyproject.toml")
    )


def read_members(data: bytes, version: str) -> dict[str, bytes]:
    """The sdist's wanted members by path inside the release's tree (``tests/v1/core/utils.py``)."""
    top = f"{PROJECT}-{version}/"
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar:
            if not (member.isfile() and member.name.startswith(top)):
                continue
            path = member.name[len(top) :]
            if wanted(path) and (handle := tar.extractfile(member)) is not None:
                out[path] = handle.read()
    if not any(p.startswith("tests/") for p in out):
        raise SdistError(f"{sdist_name(version)} carries no tests/ folder: this release cannot be judged this way")
    return out


def module_file(module: str, files: Mapping[str, bytes]) -> str | None:
    """The sdist path of module ``tests.x.y`` (a module file or a package's ``__init__.py``), if it has one."""
    base = module.replace(".", "/")
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if candidate in files:
            return candidate
    return None


def imported_modules(path: str, source: bytes) -> set[str]:
    """Every module ``path`` may import, absolute, with ``from M import N`` also giving ``M.N`` (a submodule?)."""
    package = list(PurePosixPath(path).parent.parts)  # a module's package; an __init__.py's own
    found: set[str] = set()
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def needed_files(tests: Iterable[str], files: Mapping[str, bytes]) -> list[str]:
    """The test files, what they import from ``tests`` (transitively) and its packages, the test files'
    conftest.py files (what pytest loads for them; not ``tests/conftest.py``) and the release's files."""
    pending = list(tests)
    for test in pending:
        if test not in files:
            raise SdistError(f"the sdist has no {test}")
    conftests = {
        f"{'/'.join(PurePosixPath(test).parts[:depth])}/conftest.py"
        for test in pending
        for depth in range(1, len(PurePosixPath(test).parts))
    }
    pending += sorted(c for c in conftests if c in files and c != REPLACED)
    seen: set[str] = set()
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        parts = PurePosixPath(path).parts
        for depth in range(1, len(parts)):  # every package on the way
            if (init := f"{'/'.join(parts[:depth])}/__init__.py") in files and init not in seen:
                pending.append(init)
        for module in imported_modules(path, files[path]):
            local = module == "tests" or module.startswith("tests.")
            if local and (found := module_file(module, files)) is not None and found not in seen:
                pending.append(found)
    requirements = [p for p in files if p.startswith("requirements/")]
    return sorted({*seen, *requirements, *(["pyproject.toml"] if "pyproject.toml" in files else [])})


@dataclass(frozen=True)
class Tree:
    root: Path
    version: str
    files: dict[str, str]  # path -> sha256, as written from the sdist

    def read(self, path: str) -> str:
        return (self.root / path).read_text(encoding="utf-8")


def write_tree(root: Path, version: str, tests: Iterable[str], members: Mapping[str, bytes]) -> Tree:
    """A fresh ``root`` holding exactly the needed sdist files, and a manifest of their sha256."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    written: dict[str, str] = {}
    for path in needed_files(tests, members):
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(members[path])
        written[path] = hashlib.sha256(members[path]).hexdigest()
    manifest = {"version": version, "sdist": sdist_name(version), "files": written}
    (root / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return Tree(root, version, written)


def check_tree(tree: Tree, members: Mapping[str, bytes]) -> None:
    """Every file written from the sdist is still its member byte for byte, and no ``.py`` was added."""
    for path, sha in tree.files.items():
        on_disk = hashlib.sha256((tree.root / path).read_bytes()).hexdigest()
        if on_disk != sha or hashlib.sha256(members[path]).hexdigest() != sha:
            raise SdistError(f"{tree.root / path} is not {sdist_name(tree.version)}'s {path} byte for byte")
    extra = sorted(
        str(p.relative_to(tree.root))
        for p in tree.root.rglob("*.py")
        if "__pycache__" not in p.parts and str(p.relative_to(tree.root)) not in tree.files
    )
    if extra:
        raise SdistError(f"files that are not the sdist's appeared in {tree.root}: {', '.join(extra)}")


def prepare(version: str, root: Path, tests: Iterable[str]) -> tuple[Tree, dict[str, bytes]]:
    members = read_members(sdist_bytes(version), version)
    tree = write_tree(root, version, tests, members)
    check_tree(tree, members)
    return tree, members

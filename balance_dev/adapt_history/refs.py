"""The vLLM paths a file spells, and which of them a release still defines: read with stdlib ``ast`` alone.

A file reaches vLLM by three spellings, each a dotted path: an import (``import vllm.a.b``,
``from vllm.a import Name`` -> ``vllm.a.Name``), an attribute chain rooted at ``vllm``
(``vllm.a.Name.method``) and a string argument of a call (``mock.patch("vllm.a.Name.method")``).
Relative imports are the tree's own. Whether a release defines a path is read from its files the
way Python finds it, simply: the longest prefix that is a module file, then a top-level binding of
that module (a ``def``, a class, an assignment, an import), then a class's own member; a module
with a ``__getattr__`` answers any name of its own (not a submodule's).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

# A release's files: ``vllm/a/b.py`` -> its text (None: the release has no such file).
Files = Callable[[str], str | None]

_DOTTED = re.compile(r"vllm(\.[A-Za-z_]\w*)+")


@dataclass(frozen=True, order=True)
class Ref:
    kind: str  # import | attribute | string
    path: str


def _chain(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _chain(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _strings(call: ast.Call) -> Iterator[str]:
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _DOTTED.fullmatch(arg.value):
            yield arg.value


def refs(tree: ast.Module) -> set[Ref]:
    """Every vLLM path the module spells, by kind."""
    out: set[Ref] = set()
    inner: set[int] = set()  # attributes inside a longer chain: only the whole chain counts
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {Ref("import", a.name) for a in node.names if a.name == "vllm" or a.name.startswith("vllm.")}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module == "vllm" or node.module.startswith("vllm."):
                out |= {Ref("import", f"{node.module}.{a.name}") for a in node.names if a.name != "*"}
        elif isinstance(node, ast.Call):
            out |= {Ref("string", s) for s in _strings(node)}
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            inner.add(id(node.value))
            path = _chain(node)
            if path is not None and path.startswith("vllm."):
                out.add(Ref("attribute", path))
            walk = node.value
            while isinstance(walk, ast.Attribute):
                inner.add(id(walk))
                walk = walk.value
    return out


def _module_of(path: str, files: Files) -> tuple[str, list[str]] | None:
    """The longest prefix of ``path`` that is a module of the release: its file, and the names after it."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        base = "/".join(parts[:cut])
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            if files(candidate) is not None:
                return candidate, parts[cut:]
    return None


def _bound(body: list[ast.stmt], name: str) -> ast.AST | bool | None:
    """The statement binding ``name`` at this level (ifs and trys looked into); True: bound, not a class."""
    found: ast.AST | bool | None = None
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            found = node
        elif (isinstance(node, ast.Assign) and any(name in _targets(t) for t in node.targets)) or (
            isinstance(node, (ast.AnnAssign, ast.AugAssign)) and name in _targets(node.target)
        ):
            found = True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if bound == name:
                    found = True
        else:
            for block in ("body", "orelse", "finalbody"):
                children = getattr(node, block, None)
                if isinstance(children, list) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    inner = _bound(children, name)
                    if inner is not None:
                        found = inner
            for handler in getattr(node, "handlers", []):
                inner = _bound(handler.body, name)
                if inner is not None:
                    found = inner
    return found


def _targets(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, (ast.Tuple, ast.List)):
        return {n for e in node.elts for n in _targets(e)}
    return set()


def defines(path: str, files: Files) -> bool:
    """Whether the release answers ``path``: a module, a top-level name of one, or a class's own member."""
    found = _module_of(path, files)
    if found is None:
        return False
    module, rest = found
    if not rest:
        return True
    try:
        tree = ast.parse(files(module) or "")
    except SyntaxError:
        return False
    if len(rest) == 1 and _bound(tree.body, "__getattr__") is not None:
        return True  # a module's __getattr__ serves its attributes, never a submodule's
    node = _bound(tree.body, rest[0])
    for name in rest[1:]:
        if not isinstance(node, ast.ClassDef):
            return node is not None  # a value's attributes are not read statically: bound is enough
        own = _bound(node.body, name)
        if own is None:
            return bool(node.bases)  # inherited, perhaps: the bases are not followed here
        node = own
    return node is not None

"""The tree's classes and the vLLM classes each derives from, read from the tree's own source (stdlib ``ast``).

The ``class`` rule (attribute.py) needs, for a class of the tree an error names (``Can't instantiate
abstract class Q``, a property of ``Q`` it cannot set), the vLLM base B changed under it: the file that
imports that base and the base's dotted name. A class derives from a vLLM class directly (``class
Q(Base)`` with ``from vllm.x import Base`` in its file) or through classes of the tree (followed by name,
through any file). This reading is ``explain``'s own, not ``impact``'s: what names a failure stays apart
from what predicted it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from generator.judge.explain.filepack import FilePack

_DEPTH = 20
_PACK = "explain-classes-1"  # the pack's name: bumped when ``Bases`` changes shape


def _imports(module: ast.Module) -> dict[str, str]:
    """A file's top-level names bound by ``from M import N [as A]`` and ``import M [as A]`` -> dotted."""
    out: dict[str, str] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = alias.name
                else:  # ``import vllm.x`` binds ``vllm``
                    out[alias.name.partition(".")[0]] = alias.name.partition(".")[0]
    return out


def _dotted(expr: ast.expr, imports: dict[str, str]) -> str | None:
    if isinstance(expr, ast.Subscript):
        return _dotted(expr.value, imports)
    if isinstance(expr, ast.Name):
        return imports.get(expr.id, f".{expr.id}")  # ".Q": a class of the tree, by name
    if isinstance(expr, ast.Attribute):
        inner = _dotted(expr.value, imports)
        return None if inner is None else f"{inner}.{expr.attr}"
    return None


Bases = tuple[tuple[str, str], ...]  # a file's classes: (class name, a base as the file writes it, dotted)


def _bases(data: bytes, path: str) -> Bases | None:
    try:
        module = ast.parse(data, filename=path)
    except (SyntaxError, ValueError):
        return None
    imports = _imports(module)
    return tuple(
        (node.name, dotted)
        for node in ast.walk(module)
        if isinstance(node, ast.ClassDef)
        for base in node.bases
        if (dotted := _dotted(base, imports)) is not None
    )


def read(
    root: Path, paths: Iterable[str], names: Iterable[str] | None = None, pack: FilePack[Bases] | None = None
) -> dict[str, set[tuple[str, str]]]:
    """Each class name of the tree -> (the file importing it, a vLLM class it derives from). ``names``: only
    these classes are asked about (an error names them): only the files defining them, and then the tree's
    classes they derive from, are read. ``pack``: where each file's reading is kept by its digest."""
    pack = pack if pack is not None else FilePack(_PACK, root, _bases)
    texts: dict[str, str] = {}
    for rel in sorted(set(paths)):
        try:
            texts[rel] = (root / rel).read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    direct: dict[str, set[tuple[str, str]]] = defaultdict(set)  # class -> (file, written base)
    parsed: set[str] = set()
    wanted = None if names is None else set(names)
    while True:
        todo = [
            rel
            for rel, text in texts.items()
            if rel not in parsed and (wanted is None or any(f"class {n}" in text for n in wanted))
        ]
        if not todo:
            break
        for rel in todo:
            parsed.add(rel)
            for name, dotted in pack.get(rel) or ():
                direct[name].add((rel, dotted))
        if wanted is None:
            break
        more = {
            b.rpartition(".")[2]
            for n in wanted
            for _, b in direct.get(n, ())
            if not (b == "vllm" or b.startswith("vllm."))
        }
        if more <= wanted:
            break
        wanted |= more
    pack.save()
    found: dict[str, set[tuple[str, str]]] = {}

    def vllm_bases(name: str, depth: int) -> set[tuple[str, str]]:
        if name in found or depth > _DEPTH:
            return found.get(name, set())
        found[name] = set()
        out: set[tuple[str, str]] = set()
        for rel, base in direct.get(name, ()):
            if base == "vllm" or base.startswith("vllm."):
                out.add((rel, base))
            else:  # a class of the tree (by its last name): what it derives from
                out |= vllm_bases(base.rpartition(".")[2], depth + 1)
        found[name] = out
        return out

    return {name: bases for name in sorted(direct) if (bases := vllm_bases(name, 0))}

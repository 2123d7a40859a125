"""Every ``def`` of a tree or a vLLM file, reduced to statement keys: what a census compares.

A function's statements are ``provenance``'s (a compound statement by its header; formatting and comments
do not count), kept as interned keys rather than trees, so a whole tree fits in memory.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from generator.judge import provenance
from generator.judge.census import newer_syntax

# A copy shares at least this many statements with its upstream function (the def line is one):
# below it, one-line accessors and `super().__init__(...)` wrappers would match by chance.
MIN_MATCHED = 6
# ... and they are at least this share of the longer function's statements: a copy keeps most of
# upstream's statements and adds fewer than it keeps.
MIN_SHARE = 0.5
# Folders of a tree that hold no source of its own.
_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__"})
BLOCKS = ("body", "handlers", "orelse", "finalbody", "cases")

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(eq=False)
class Function:
    """One ``def`` of a file: where it is, its qualified name (``Class.method``) and its statements.

    A census holds statement keys, not syntax trees: ``settle`` reduces a function and drops its node.
    """

    path: str  # relative to the tree's or the source's root, with / separators
    qualname: str
    name: str
    line: int
    size: int  # statements as provenance counts them, without reducing
    node: FunctionNode | None = field(default=None, repr=False)
    _keys: tuple[int, ...] | None = field(default=None, repr=False)

    @property
    def keys(self) -> tuple[int, ...]:
        """``provenance.reduce(node).keys``, computed once."""
        if self._keys is None:
            if self.node is None:
                raise ValueError(f"{self.path}:{self.line} {self.qualname} was settled without its statements")
            self._keys = statement_keys(self.node)
        return self._keys

    def settle(self, reduce: bool) -> None:
        """Keep the keys (when ``reduce`` and the function is big enough to be compared), drop the node."""
        if reduce and self.size >= MIN_MATCHED:
            self.keys  # noqa: B018 - computed for its side effect
        self.node = None

    def method(self) -> provenance.Method:
        """The statements with their lines and text, for a copy's edits (the node must be there)."""
        if self.node is None:
            raise ValueError(f"{self.path}:{self.line} {self.qualname} has no node to reduce")
        return provenance.reduce(self.node)  # type: ignore[arg-type]


# ``ast.dump``'s text, default arguments, written again without its pretty-printing's bookkeeping: a census dumps
# every statement of every function of a release, and ``ast.dump`` was more than half of building its index.
# Python 3.13 changed ``ast.dump`` (empty fields left out): there, and after, ``ast.dump`` itself.
_OWN_DUMP = sys.version_info < (3, 13)
# A node class -> "Name(" and its fields: each with "field=", and whether a None there is left out.
_SHAPES: dict[type, tuple[str, tuple[tuple[str, str, bool], ...]]] = {}


def _shape(cls: type) -> tuple[str, tuple[tuple[str, str, bool], ...]]:
    found = _SHAPES.get(cls)
    if found is None:
        fields: tuple[str, ...] = getattr(cls, "_fields", ())
        found = (f"{cls.__name__}(", tuple((n, f"{n}=", getattr(cls, n, ...) is None) for n in fields))
        _SHAPES[cls] = found
    return found


def dump(node: object, empty: tuple[str, ...] = ()) -> str:
    """``ast.dump(node)``, each field named in ``empty`` (a list) shown as ``[]``: a statement's header."""
    if not _OWN_DUMP:
        return ast.dump(provenance._header(node) if empty else node)  # type: ignore[arg-type]
    if isinstance(node, ast.AST):
        head, fields = _shape(type(node))
        parts = []
        for name, label, none_left_out in fields:
            try:
                value = getattr(node, name)
            except AttributeError:
                continue
            if value is None:
                if not none_left_out:
                    parts.append(f"{label}None")
            elif type(value) is list:
                shown = "" if name in empty else ", ".join([dump(x) for x in value])
                parts.append(f"{label}[{shown}]")
            else:
                parts.append(label + dump(value))
        return head + ", ".join(parts) + ")"
    if isinstance(node, list):
        return f"[{', '.join([dump(x) for x in node])}]"
    return repr(node)


def statement_keys(func: FunctionNode) -> tuple[int, ...]:
    """``provenance.reduce(func).keys`` without each statement's text for messages, which costs a third more.

    The same walk as ``provenance._walk`` (tests hold the two equal on upstream's files).
    """
    keys = [provenance._intern(0, dump(func, BLOCKS))]

    def walk(node: ast.AST, depth: int) -> None:
        keys.append(provenance._intern(depth, dump(node, BLOCKS)))
        for name in BLOCKS:
            children = getattr(node, name, None)
            if not (isinstance(children, list) and children):
                continue
            if name not in ("body", "handlers", "cases"):
                keys.append(provenance._intern(depth, f"<{name}>"))
            for child in children:
                walk(child, depth + 1)

    for node in func.body:
        walk(node, 1)
    return tuple(keys)


def _count(nodes: Sequence[ast.AST]) -> tuple[int, bool]:
    """Statements below ``nodes`` as ``provenance.statements`` yields them, and whether a ``match`` is among them."""
    total, has_match = 0, False
    for node in nodes:
        total += 1
        has_match = has_match or type(node).__name__ == "Match"
        for name in BLOCKS:
            children = getattr(node, name, None)
            if not (isinstance(children, list) and children):
                continue
            if name not in ("body", "handlers", "cases"):  # `else:` and `finally:` count as statements
                total += 1
            n, nested = _count(children)
            total, has_match = total + n, has_match or nested
    return total, has_match


def _number_cases(func: ast.AST) -> None:
    # ``match_case`` has no line numbers, which provenance reads of every statement: the pattern's.
    for node in ast.walk(func):
        cases = getattr(node, "cases", None)
        if type(node).__name__ == "Match" and isinstance(cases, list):
            for case in cases:
                case.lineno = case.pattern.lineno
                case.end_lineno = case.pattern.end_lineno


def functions(tree: ast.Module, path: str) -> list[Function]:
    """Every ``def`` in ``tree`` (methods, nested functions, those under ``if``/``try``), outermost first."""
    out: list[Function] = []

    def visit(body: Sequence[ast.AST], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size, has_match = _count(node.body)
                if has_match:
                    _number_cases(node)
                qualname = prefix + node.name
                out.append(Function(path, qualname, node.name, node.lineno, size + 1, node))
                visit(node.body, f"{qualname}.<locals>.")
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            else:
                for name in BLOCKS:
                    children = getattr(node, name, None)
                    if isinstance(children, list):
                        visit(children, prefix)

    visit(tree.body, "")
    return out


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


def python_files(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(folder) / name


def parse(
    source: str | bytes, rel: str, skipped: list[Skipped], newer: list[Skipped] | None = None
) -> ast.Module | None:
    """``source`` parsed, or None with the reason in ``skipped`` (a tree's file that is not Python is no crash).

    A file of a newer Python's syntax than the running one is read all the same (``newer_syntax``), and said
    in ``newer``."""
    try:
        tree, note = newer_syntax.parse(source, rel)
        if note and newer is not None:
            newer.append(Skipped(rel, note))
        return tree
    except (SyntaxError, ValueError, UnicodeDecodeError) as exc:  # ValueError: null bytes
        if isinstance(exc, SyntaxError) and exc.msg.startswith("a newer Python"):
            skipped.append(Skipped(rel, f"does not parse: {exc.msg}"))
        else:
            line = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
            skipped.append(Skipped(rel, f"does not parse{line}"))
    except RecursionError:
        skipped.append(Skipped(rel, "nests too deeply to parse"))
    return None


def read_functions(
    root: Path, skipped: list[Skipped], reduce: Callable[[str], bool] = lambda _: True
) -> tuple[list[Function], int]:
    """Every function of every ``.py`` file under ``root``, and how many files parsed (the rest: ``skipped``).

    Each is settled: reduced when big enough and ``reduce(name)`` (upstream has a function so named).
    """
    out: list[Function] = []
    parsed = 0
    for file in python_files(root):
        rel = file.relative_to(root).as_posix()
        try:
            data = file.read_bytes()
        except OSError as exc:
            skipped.append(Skipped(rel, f"cannot be read ({exc.strerror or exc})"))
            continue
        if (tree := parse(data, rel, skipped)) is None:
            continue
        parsed += 1
        found = functions(tree, rel)
        for func in found:
            func.settle(reduce(func.name))
        out.extend(found)
    return out, parsed


def parse_or_empty(text: str | bytes, path: str) -> ast.Module:
    try:
        return ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError):
        return ast.Module(body=[], type_ignores=[])

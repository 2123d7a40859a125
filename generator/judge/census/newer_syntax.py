"""A tree's file written for a newer Python than the one running the tool, read all the same.

A plugin may need Python 3.12 (``type X = ...``, ``def f[T: Bound](...)``, ``class C[T]:``) while the tool
runs on 3.11, whose ``ast`` refuses those files. libcst's parser reads them: the file is parsed with it, the
3.12 forms are rewritten to what 3.11 reads on the same lines (``type X = v`` -> ``X = v``, the type
parameters dropped), and that text is parsed with ``ast``. Every other statement, name and line stays where
it was, so what is read of the file (its imports, calls, classes, functions) is the file's own. A file
neither reads is reported with the line where Python stopped and, when libcst reads it, the Python it needs.
"""

from __future__ import annotations

import ast
import functools
import sys

import libcst as cst


class _Downgrade(cst.CSTTransformer):
    """3.12's type statements and type parameters, written as 3.11 reads them, line for line."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def leave_TypeAlias(self, original: cst.TypeAlias, updated: cst.TypeAlias) -> cst.Assign:
        self.found.append("a type statement")
        return cst.Assign(targets=[cst.AssignTarget(target=updated.name)], value=updated.value)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if updated.type_parameters is None:
            return updated
        self.found.append("type parameters")
        return updated.with_changes(type_parameters=None, whitespace_after_type_parameters=cst.SimpleWhitespace(""))

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        if updated.type_parameters is None:
            return updated
        self.found.append("type parameters")
        return updated.with_changes(type_parameters=None, whitespace_after_type_parameters=cst.SimpleWhitespace(""))


def parse(source: str | bytes, filename: str) -> tuple[ast.Module, str]:
    """``source`` as ``ast`` reads it, and "" when the running Python reads it; else, when it is a newer
    Python's, read through libcst, with what made it so (``needs Python 3.12: a type statement``). Raises the
    running Python's own ``SyntaxError`` when neither reads it (a file that is not Python at all).

    A text read lately is not parsed again (``adapt`` asks of one file's text in several places): the tree is
    shared, and no caller changes it."""
    if isinstance(source, str) and len(source) > _CACHED_FROM:
        return _parse_text(source, filename)
    return _parse(source, filename)


_CACHED_FROM = 4096  # characters: below, parsing costs less than keeping


@functools.lru_cache(maxsize=64)
def _parse_text(source: str, filename: str) -> tuple[ast.Module, str]:
    return _parse(source, filename)


def _parse(source: str | bytes, filename: str) -> tuple[ast.Module, str]:
    try:
        return ast.parse(source, filename=filename), ""
    except SyntaxError as exc:
        first = exc
    text = source.decode("utf-8") if isinstance(source, bytes) else source
    try:
        module = cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError):
        raise first from None
    downgrade = _Downgrade()
    lowered = module.visit(downgrade).code
    try:
        tree = ast.parse(lowered, filename=filename)
    except SyntaxError:
        running = f"{sys.version_info[0]}.{sys.version_info[1]}"
        raise SyntaxError(
            f"a newer Python's syntax than {running} (libcst reads it; line {first.lineno})",
            (filename, first.lineno, 0, ""),
        ) from None
    forms = ", ".join(dict.fromkeys(downgrade.found)) or "its syntax"
    return tree, f"needs Python 3.12 ({forms}); read with libcst"

"""Code patterns with placeholders, matched against stdlib ``ast`` nodes.

A pattern is ordinary Python in which a name written in capitals (``GATE``, ``ARGS``) stands for
whatever code is there. It lets the forms a hand copy wrote its deltas in be declared as the code
they are (``copy_forms.py``) instead of walked by hand. Three placeholders stand for a run of
zero or more items of a list, so that one pattern covers every signature or body:

- a statement that is only the placeholder (``BODY``) matches any run of statements;
- ``*ARGS`` matches any run of positional arguments, ``**KWARGS`` any run of keyword arguments.

Everything else matches only itself, compared field by field as ``ast`` sees it (no positions,
no comments, no formatting). A placeholder used twice must match equal code both times.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from functools import cache
from typing import TypeAlias

Captured: TypeAlias = "ast.AST | list[ast.AST]"


def _placeholder(node: object) -> str | None:
    """The placeholder a pattern node is, or None: ``NAME``, ``*NAME``, ``**NAME`` or a statement ``NAME``."""
    if isinstance(node, (ast.Expr, ast.Starred)) or (isinstance(node, ast.keyword) and node.arg is None):
        node = node.value
    if isinstance(node, ast.Name) and len(node.id) > 1 and node.id.isupper():
        return node.id
    return None


def _run_placeholder(node: object) -> str | None:
    """A placeholder that stands for a run of list items (a statement, ``*ARGS`` or ``**KWARGS``)."""
    if isinstance(node, (ast.Expr, ast.Starred)) or (isinstance(node, ast.keyword) and node.arg is None):
        return _placeholder(node)
    return None


@cache
def statements(code: str) -> tuple[ast.stmt, ...]:
    """A pattern's statements (parsed once; patterns are data, so they are few)."""
    return tuple(ast.parse(code).body)


@cache
def expression(code: str) -> ast.expr:
    return ast.parse(code, mode="eval").body


def same(a: ast.AST | list[ast.AST], b: ast.AST | list[ast.AST]) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(same(x, y) for x, y in zip(a, b, strict=True))
        )
    return ast.dump(a) == ast.dump(b)


def _bind(name: str, value: Captured, captures: dict[str, Captured]) -> bool:
    if name in captures:
        return same(captures[name], value)
    captures[name] = value
    return True


def match(pattern: ast.AST, node: ast.AST, captures: dict[str, Captured]) -> bool:
    """Whether ``node`` is ``pattern``; placeholders' code is added to ``captures``.

    On a failed match ``captures`` may hold partial bindings: pass a fresh dict per attempt.
    """
    name = _placeholder(pattern)
    if name is not None and isinstance(pattern, ast.Name):
        return _bind(name, node, captures)
    if type(pattern) is not type(node):
        return False
    for field in pattern._fields:
        want, got = getattr(pattern, field, None), getattr(node, field, None)
        if isinstance(want, list):
            if not (isinstance(got, list) and match_list(want, got, captures)):
                return False
        elif isinstance(want, ast.AST):
            if not (isinstance(got, ast.AST) and match(want, got, captures)):
                return False
        elif want != got:
            return False
    return True


def match_list(pattern: Sequence[ast.AST], nodes: Sequence[ast.AST], captures: dict[str, Captured]) -> bool:
    """Item by item; at most one run placeholder per list takes whatever its neighbours leave."""
    runs = [i for i, p in enumerate(pattern) if _run_placeholder(p) is not None]
    if len(runs) > 1:
        raise ValueError("a pattern list may hold at most one run placeholder")
    if not runs:
        return len(pattern) == len(nodes) and all(match(p, n, captures) for p, n in zip(pattern, nodes, strict=True))
    at = runs[0]
    after = len(pattern) - at - 1
    if len(nodes) < at + after:
        return False
    head, tail = nodes[:at], nodes[len(nodes) - after :]
    if not all(match(p, n, captures) for p, n in zip(pattern[:at], head, strict=True)):
        return False
    if not all(match(p, n, captures) for p, n in zip(pattern[at + 1 :], tail, strict=True)):
        return False
    name = _run_placeholder(pattern[at])
    assert name is not None
    return _bind(name, list(nodes[at : len(nodes) - after]), captures)


def match_run(code: str, block: Sequence[ast.stmt], index: int) -> dict[str, Captured] | None:
    """Whether the statements of ``code`` are ``block[index:]``'s next ones; their captures if so."""
    pattern = statements(code)
    run = block[index : index + len(pattern)]
    captures: dict[str, Captured] = {}
    if len(run) == len(pattern) and all(match(p, n, captures) for p, n in zip(pattern, run, strict=True)):
        return captures
    return None

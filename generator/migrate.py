"""Migration from a hand-kept copy: is it upstream's ``schedule()`` plus the balance deltas, and how far
does its text stray?

A hand copy (vllm-ascend's own ``patch_balance_schedule.py``) carries the deltas in whatever form
it was written (the seed's ``max(t.item() for t in self.balance_queue) == ...`` gate included) and
is often reformatted. Two verdicts: the AST with the deltas taken out equals upstream's or names
the first semantic difference; and the text hunks that differ, with how many differ only in
formatting (whitespace, line breaks, brackets, trailing commas). Stdlib ``ast`` only.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass

from generator.errors import VerificationFailed
from generator.verify import is_break_if, methods_named

METHOD = "schedule"
_BALANCE_STATE = ("balance_queue", "balance_leader_running")
_ASSERT = "assert request_queue is not None"


@dataclass(frozen=True)
class CopyReport:
    ast_equal: bool
    first_difference: str  # "" when the ASTs are equal
    hunks: int  # text hunks that differ from upstream, deltas taken out
    formatting_only: int  # of those, hunks that differ only in formatting

    def lines(self) -> list[str]:
        verdict = "equal to upstream's" if self.ast_equal else f"NOT upstream's: {self.first_difference}"
        return [
            f"AST (deltas taken out): {verdict}",
            f"text: {self.hunks} hunks differ from upstream, {self.formatting_only} of them only in formatting",
        ]


def _method(tree: ast.Module) -> ast.FunctionDef:
    # The copy's class is the one whose schedule() reads balance state.
    found = [f for f in methods_named(tree, None, METHOD) if _reads_balance_state(f)]
    if len(found) != 1:
        raise VerificationFailed(f"expected one {METHOD}() with balance state in the copy, found {len(found)}")
    return found[0]


def _blocks(func: ast.FunctionDef) -> list[list[ast.stmt]]:
    return [
        block
        for node in ast.walk(func)
        for name in ("body", "orelse", "finalbody")
        if isinstance(block := getattr(node, name, None), list) and block and isinstance(block[0], ast.stmt)
    ]


def _reads_balance_state(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in _BALANCE_STATE for n in ast.walk(node))


def _take_out_deltas(func: ast.FunctionDef) -> tuple[set[int], bool]:
    """Remove the deltas from ``func`` in place (delta 3 becomes upstream's assert).

    Returns their lines, and whether delta 3 was there (then upstream's assert is no difference).
    """
    lines: set[int] = set()
    queue_break = False
    first = func.body[0]
    if isinstance(first, ast.If) and ast.unparse(first.test) == "not self._balance_enabled":
        lines |= set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
        del func.body[0]
    for block in _blocks(func):
        for i in reversed(range(len(block))):
            node = block[i]
            if is_break_if(node) and _reads_balance_state(node):
                lines |= set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
                del block[i]
            elif is_break_if(node) and ast.unparse(node.test) == "request_queue is None":  # type: ignore[attr-defined]
                lines |= set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
                block[i] = ast.parse(_ASSERT).body[0]
                queue_break = True
    return lines, queue_break


def _statements(func: ast.FunctionDef) -> list[ast.stmt]:
    return [n for n in ast.walk(func) if isinstance(n, ast.stmt) and n is not func]


def _first_difference(copy: ast.FunctionDef, upstream: ast.FunctionDef) -> str:
    ours, theirs = _statements(copy), _statements(upstream)
    for mine, up in zip(ours, theirs, strict=False):
        if ast.dump(mine) != ast.dump(up) and not (
            isinstance(mine, type(up)) and type(mine) in (ast.If, ast.While, ast.For, ast.With, ast.Try)
        ):
            return (
                f"the copy's line {mine.lineno} `{ast.unparse(mine).splitlines()[0]}` "
                f"is upstream's line {up.lineno} `{ast.unparse(up).splitlines()[0]}`"
            )
    return f"the copy has {len(ours)} statements, upstream {len(theirs)}"


_CLOSING_COMMA = re.compile(r",(?=[)\]}])")


def _formatting_only(copy: list[str], upstream: list[str]) -> bool:
    def squash(lines: list[str]) -> str:
        text = re.sub(r"\s+", "", "".join(lines))
        return _CLOSING_COMMA.sub("", text)

    a, b = squash(copy), squash(upstream)
    return a == b or a.replace("(", "").replace(")", "") == b.replace("(", "").replace(")", "")


def compare_copy(copy_text: str, upstream_text: str) -> CopyReport:
    try:
        copy_tree = ast.parse(copy_text)
    except SyntaxError as exc:
        raise VerificationFailed(f"the copy does not parse (line {exc.lineno})") from None
    copy = _method(copy_tree)
    upstream = _method_of_upstream(upstream_text)
    delta_lines, queue_break = _take_out_deltas(copy)
    ast_equal = ast.dump(copy) == ast.dump(upstream)
    first = "" if ast_equal else _first_difference(copy, upstream)

    def method_lines(text: str, func: ast.FunctionDef, skip: set[int]) -> list[str]:
        lines = text.splitlines()
        return [lines[n - 1] for n in range(func.lineno, (func.end_lineno or func.lineno) + 1) if n not in skip]

    mine = method_lines(copy_text, copy, delta_lines)
    # Delta 3's counterpart upstream (its assert) is no text difference either.
    asserts = {n.lineno for n in _statements(upstream) if queue_break and ast.unparse(n) == _ASSERT}
    theirs = method_lines(upstream_text, upstream, asserts)
    hunks = [op for op in difflib.SequenceMatcher(None, mine, theirs, autojunk=False).get_opcodes() if op[0] != "equal"]
    formatting = sum(_formatting_only(mine[i1:i2], theirs[j1:j2]) for _, i1, i2, j1, j2 in hunks)
    return CopyReport(ast_equal, first, len(hunks), formatting)


def _method_of_upstream(text: str) -> ast.FunctionDef:
    found = methods_named(ast.parse(text), "Scheduler", METHOD)
    if len(found) != 1:
        raise VerificationFailed(f"upstream has {len(found)} Scheduler.{METHOD}()")
    return found[0]

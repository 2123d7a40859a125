"""The form ``adapt --span`` writes its edits in: A's code and B's behind the tree's own version gate.

The tree keeps running on A and B both: every edit is written so that, its gates evaluated, the tree is at A
exactly the code it was and at B exactly what plain ``adapt`` writes. The gate is the tree's own helper
(``gates.helper_op``; found in the tree or declared in ``balance-patchgen.toml``, never assumed), called as the
file calls it, imported the way the file imports its neighbours where the file lacks it:

- an import statement: ``if vllm_version_is("0.30.0"):`` A's statement ``else:`` B's (one gate per statement,
  as vllm-ascend's files write them);
- an attribute path or a string target: ``(A's if vllm_version_is("0.30.0") else B's)`` in its place;
- a re-synced copy: the whole function, A's as it was and the merged one, each under its branch (decorators and
  comments with it). Why the whole function and not each statement that differs: the merged copy is B's
  function with the copy's edits, checked as one; a gate per statement would have to split the merge back
  into hunks that each stand alone in one block (a changed ``if`` header holds blocks both sides changed),
  and one that cannot would leave the function half-gated. The whole function gated holds every merge, and
  its two branches are byte for byte the two checked texts.

A helper that asks ``is`` (``==``) gates on A (``vllm_version_is(A)``: A's form first); one that asks ``at
least`` (``>=``) gates on B (B's form first). A tree with no helper can span an import with ``try: from B's
path import X`` / ``except ImportError: from A's path import X``; every other edit is left for a person.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import libcst as cst

GATE_OPS = ("==", ">=")


@dataclass(frozen=True)
class Span:
    """A (the release the tree keeps) and B (the one it adds), and the tree's gate helper (None: no helper:
    imports are spanned with ``try``/``except ImportError``, nothing else)."""

    old: str  # A's version, ``0.30.0``
    new: str
    helper: str | None = None  # the helper's dotted path, ``vllm_ascend.utils.vllm_version_is``
    op: str = "=="

    @property
    def name(self) -> str:
        return (self.helper or "").rpartition(".")[2]

    @property
    def test(self) -> str:
        """The gate's test as the file writes it: true at the release whose form comes first."""
        release = self.old if self.op == "==" else self.new
        return f'{self.name}("{release}")'

    def ordered(self, a: str, b: str) -> tuple[str, str]:
        """A's and B's forms in the order the test takes them (its true branch first)."""
        return (a, b) if self.op == "==" else (b, a)

    @property
    def b_test(self) -> str:
        """A test true at B alone (for what only B's form needs: an import of a module A does not have)."""
        return f'not {self.name}("{self.old}")' if self.op == "==" else self.test

    def b_only(self, statement: str) -> str:
        """One statement, run at B alone."""
        return f"if {self.b_test}:\n    {statement}"

    @property
    def import_line(self) -> str:
        module, _, name = (self.helper or "").rpartition(".")
        return f"from {module} import {name}"


def expression(span: Span, a: str, b: str) -> cst.BaseExpression:
    """``(a if gate else b)`` (A's and B's forms of one expression), parenthesized to sit anywhere."""
    first, second = span.ordered(a, b)
    made = cst.parse_expression(f"({first} if {span.test} else {second})")
    return made


def statements(span: Span, a: cst.SimpleStatementLine, b: list[cst.SimpleStatementLine]) -> cst.BaseStatement:
    """A's statement line and B's, each under its branch of the gate (the line's comments above the ``if``)."""
    a_line = a.with_changes(leading_lines=[])
    b_lines = [line.with_changes(leading_lines=[]) for line in b]
    if span.helper is None:
        # ``try: B`` / ``except ImportError: A``: B's import first, A's where B's module is not there
        handler = cst.ExceptHandler(body=cst.IndentedBlock([a_line]), type=cst.Name("ImportError"))
        return cst.Try(body=cst.IndentedBlock(b_lines), handlers=[handler], leading_lines=a.leading_lines)
    first, second = ([a_line], b_lines) if span.op == "==" else (b_lines, [a_line])
    test = cst.parse_expression(span.test)
    return cst.If(
        test=test,
        body=cst.IndentedBlock(first),
        orelse=cst.Else(body=cst.IndentedBlock(second)),
        leading_lines=a.leading_lines,
    )


def function(span: Span, a_text: str, b_text: str) -> str | None:
    """A's text of a function (decorators and all, as the file has it) and B's, each under its branch of the
    gate, at the function's indentation; None when the texts cannot be held so (a line of a string that starts
    left of the function's own indentation)."""
    indent = a_text[: len(a_text) - len(a_text.lstrip())].rpartition("\n")[2]
    a_body, b_body = textwrap.dedent(a_text), textwrap.dedent(b_text)
    if indent and (a_body == a_text or not a_body.startswith(("def", "async", "@"))):
        return None
    try:
        a_defs, b_defs = cst.parse_module(a_body).body, cst.parse_module(b_body).body
    except cst.ParserSyntaxError:
        return None
    first, second = (a_defs, b_defs) if span.op == "==" else (b_defs, a_defs)
    gated = cst.If(
        test=cst.parse_expression(span.test),
        body=cst.IndentedBlock(list(first)),
        orelse=cst.Else(body=cst.IndentedBlock(list(second))),
    )
    code = cst.Module(body=[gated]).code
    # A string's own lines (a docstring's) are not re-indented by libcst: the dedent and this indent, applied to
    # every line alike, give each its own back.
    return textwrap.indent(code, indent) if indent else code

"""What a placeholder carries from upstream into an edit's code: upstream's text, meaning the same code.

Small upstream functions written here (no release needed): each edit is applied by ``edits.apply``
and the result is read back with ``ast``.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from generator.builder import edits, extract
from generator.builder.edit_data import Edit
from generator.errors import EditDoesNotApply
from generator.tree.layout import CopySpec


def _apply(upstream_body: str, anchor: str, kind: str, code: str) -> str:
    text = "class Scheduler:\n    def schedule(self):\n" + textwrap.indent(textwrap.dedent(upstream_body), " " * 8)
    module = extract.parse(text, "v0.0.0")
    method = extract.extract(module, "v0.0.0").method
    spec = CopySpec(
        name="t",
        upstream_class="Scheduler",
        upstream_method="schedule",
        destination=Path("x.py"),
        dest_class="X",
        dest_method="schedule",
        edits=(Edit(name="e", anchor=anchor, kind=kind, code=code),),
    )
    new, _ = edits.apply(module, method, spec, tag="v0.0.0", upstream_text=text)
    return textwrap.dedent(cst.Module(body=[]).code_for_node(new.body)).lstrip("\n")


def test_a_run_of_statements_inside_a_block_comes_as_its_lines_not_as_one_tuple() -> None:
    upstream = """
    while queue:
        request = queue.peek()
        if request.stale and not request.drop:
            # stale: skip it
            queue.pop()
            skipped.prepend(request)  # kept for later
            continue
        run(request)
    """
    out = _apply(
        upstream,
        "if STALE and not request.drop:\n    SKIP\n    continue\n",
        "after",
        "if not self.admit(request):\n    SKIP\n    continue\n",
    )
    assert (
        "    if not self.admit(request):\n        queue.pop()\n        skipped.prepend(request)  # kept for later\n"
        in out
    )
    assert out.count("# stale: skip it") == 1  # the comment above the run describes upstream's branch: not carried
    assert "queue.pop(), skipped.prepend(request)" not in out


def test_an_expression_placeholder_keeps_its_precedence_in_the_edits_code() -> None:
    upstream = """
    if not preempted and (paused_new or unpaused):
        admit()
    """
    out = _apply(
        upstream,
        "if not preempted and PAUSE:\n    BODY\n",
        "instead",
        "if not preempted and not self.recomputed and PAUSE:\n    BODY\n",
    )
    assert "if not preempted and not self.recomputed and (paused_new or unpaused):" in out
    (stmt,) = ast.parse(out).body
    assert isinstance(stmt, ast.If) and isinstance(stmt.test, ast.BoolOp) and len(stmt.test.values) == 3


def test_an_expression_placeholder_that_needs_no_parentheses_gets_none() -> None:
    out = _apply(
        "if not preempted and self.state == State.UNPAUSED:\n    admit()\n",
        "if not preempted and PAUSE:\n    BODY\n",
        "instead",
        "if not preempted and not self.recomputed and PAUSE:\n    BODY\n",
    )
    assert out.startswith("if not preempted and not self.recomputed and self.state == State.UNPAUSED:\n")


def test_upstreams_text_is_never_searched_for_another_placeholder() -> None:
    # upstream's body reads a constant that happens to be spelled like the edit's other placeholder
    out = _apply(
        "if ready:\n    emit(GO)\n",
        "if GO:\n    BODY\n",
        "instead",
        "if GO and self.extra:\n    BODY\n",
    )
    assert out == "if ready and self.extra:\n    emit(GO)\n"


def test_a_placeholder_whose_text_cannot_mean_upstreams_code_there_refuses() -> None:
    # inside a string the placeholder's text is no code: the result does not read back as the edit
    with pytest.raises(EditDoesNotApply, match="no longer reads as the edit"):
        _apply("if ready:\n    go()\n", "if COND:\n    BODY\n", "instead", 'if COND:\n    log("COND")\n    BODY\n')

"""Phase 2B: the upstream change that makes the copy unnecessary.

The WAITING loop's running-cap check moves, as written, into an overridable
``Scheduler._should_stop_admitting_waiting()``; the loop calls it. The method's body is upstream's
own statements (the count's assignment, if any, and ``return <upstream's condition>``), so
behaviour is unchanged by construction. Once a release has the seam, vllm-ascend overrides that
one method and copies nothing.
"""

from __future__ import annotations

import ast
import difflib
import textwrap
from dataclasses import dataclass

import libcst as cst

from generator.builder import anchors, deltas, extract
from generator.errors import UpstreamShapeError
from generator.sources.base import UPSTREAM_PATH, UpstreamFile

SEAM_METHOD = "_should_stop_admitting_waiting"


def has_seam(text: str, tag: str) -> bool:
    """Does upstream's ``Scheduler`` at this tag already define the seam?"""
    if f"def {SEAM_METHOD}(" not in text:  # every release so far: no second parse on the hot path
        return False
    found = extract.extract(extract.parse(text, tag), tag)
    return any(isinstance(s, cst.FunctionDef) and s.name.value == SEAM_METHOD for s in found.cls.body.body)


def no_copy_reason(upstream: UpstreamFile) -> str | None:
    """Where upstream has the seam, why no copy is needed (the runtime overrides the method instead)."""
    if not has_seam(upstream.text, upstream.tag):
        return None
    return f"vLLM {upstream.tag} has Scheduler.{SEAM_METHOD}(): vllm_ascend overrides it and needs no copy"


@dataclass(frozen=True)
class Seam:
    patched: str  # upstream's file with the seam
    diff: str  # ``git apply`` / ``patch -p1`` ready, against upstream's file at the tag
    condition: str  # upstream's condition, now the method's return value
    description: str  # the pull request's text


def make_seam(upstream: UpstreamFile) -> Seam:
    tag, text = upstream.tag, upstream.text
    if has_seam(text, tag):
        raise UpstreamShapeError(f"vLLM {tag} already has Scheduler.{SEAM_METHOD}(): nothing to contribute")
    module = extract.parse(text, tag)
    found = extract.extract(module, tag)
    ctx = deltas.DeltaContext(tag, module, method=found.method)
    hit, cap = deltas.LeaderAtCapFreezes().find(found.method, ctx)
    check = hit.stmt
    condition = _condition(ctx, check, cap)

    body = list(hit.block.body)
    assignment = body[hit.index - 1] if cap.assigned else None
    moved: list[cst.BaseStatement] = []
    body[hit.index] = _calling(check, condition)
    if assignment is not None:
        # The count's assignment goes into the method; it also stays in the loop if the loop
        # reads the name elsewhere, so no other line can change behaviour.
        # (Its comments explain the count, so they go with it.)
        moved.append(assignment)
        if not _read_elsewhere(ctx, found.method, assignment, check):
            del body[hit.index - 1]
    method = anchors.replace(found.method, hit.path, hit.block, anchors.with_block_body(hit.block, body))

    seam_method = _seam_method(ctx, moved, condition)
    members = list(found.cls.body.body)
    at = members.index(found.method)
    members[at] = method.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    members.insert(at, seam_method.with_changes(leading_lines=found.method.leading_lines))
    cls = found.cls.with_changes(body=found.cls.body.with_changes(body=members))
    patched = module.with_changes(body=[cls if s is found.cls else s for s in module.body]).code
    return Seam(patched, unified_diff(text, patched), cap.check, _description(tag, cap.check))


def _condition(ctx: deltas.DeltaContext, check: cst.BaseStatement, cap: deltas.CapCheck) -> cst.BaseExpression:
    """Upstream's cap comparison in ``check``: a break's test, or the stop flag's disjunct that asks it."""
    if isinstance(check, cst.If):
        return check.test
    assert isinstance(check, cst.SimpleStatementLine) and isinstance(check.body[0], cst.Assign)
    (asked,) = [d for d in deltas.disjuncts(check.body[0].value) if deltas.one_line(ctx.code(d)) == cap.check]
    return asked


def _calling(check: cst.BaseStatement, condition: cst.BaseExpression) -> cst.BaseStatement:
    """``check`` asking the seam instead: ``if self.<seam>(): break``, or the flag with the call in its place."""
    if isinstance(check, cst.If):
        call = cst.parse_statement(f"if self.{SEAM_METHOD}():\n    break\n")
        return call.with_changes(leading_lines=check.leading_lines)
    replaced = check.deep_replace(condition, cst.parse_expression(f"self.{SEAM_METHOD}()"))
    assert isinstance(replaced, cst.SimpleStatementLine)
    return replaced


def _seam_method(
    ctx: deltas.DeltaContext, moved: list[cst.BaseStatement], condition: cst.BaseExpression
) -> cst.FunctionDef:
    # Written inside a class so the docstring's own lines carry the method's indentation.
    holder = cst.parse_statement(
        "class Scheduler:\n"
        f"    def {SEAM_METHOD}(self) -> bool:\n"
        '        """Whether schedule() stops admitting WAITING requests: the running-request cap.\n'
        "\n"
        "        Overridable, so a scheduler that coordinates admission across data-parallel\n"
        "        ranks can extend this one condition instead of copying schedule().\n"
        '        """\n'
        f"        return {deltas.one_line(ctx.code(condition))}\n"
    )
    assert isinstance(holder, cst.ClassDef) and isinstance(holder.body, cst.IndentedBlock)
    template = holder.body.body[0]
    assert isinstance(template, cst.FunctionDef) and isinstance(template.body, cst.IndentedBlock)
    doc, ret = template.body.body
    return template.with_changes(body=template.body.with_changes(body=[doc, *moved, ret]))


def _read_elsewhere(
    ctx: deltas.DeltaContext, method: cst.FunctionDef, assignment: cst.BaseStatement, check: cst.BaseStatement
) -> bool:
    """Can any read of the count's name but the check see this assignment?

    Such a read is after it, or anywhere in a loop around it (a later iteration); then the
    assignment must stay in the loop too.
    """
    assert isinstance(assignment, cst.SimpleStatementLine) and isinstance(assignment.body[0], cst.Assign)
    target = assignment.body[0].targets[0].target
    assert isinstance(target, cst.Name)
    source = textwrap.dedent(ctx.code(method).lstrip("\n"))
    tree = ast.parse(source)
    check_line = _line_of(source, ctx.code(check))
    # The check's own lines (a stop flag spans several) read the count only where the seam's call goes.
    check_lines = range(check_line, check_line + len(ctx.code(check).strip("\n").splitlines()))
    assigned_line = check_line - 1
    loops = [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.While, ast.For)) and n.lineno <= assigned_line <= (n.end_lineno or n.lineno)
    ]
    visible_from = min([assigned_line, *(loop.lineno for loop in loops)])
    return any(
        isinstance(node, ast.Name)
        and node.id == target.value
        and isinstance(node.ctx, ast.Load)
        and node.lineno >= visible_from
        and node.lineno not in check_lines
        for node in ast.walk(tree)
    )


def _line_of(source: str, statement: str) -> int:
    """1-based line of the statement's first line in ``source`` (anchors are exactly-once statements)."""
    first = textwrap.dedent(statement.lstrip("\n")).splitlines()[0].strip()
    (line,) = [n for n, text in enumerate(source.splitlines(), 1) if text.strip() == first]
    return line


def unified_diff(old: str, new: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{UPSTREAM_PATH}",
        tofile=f"b/{UPSTREAM_PATH}",
    )
    return f"diff --git a/{UPSTREAM_PATH} b/{UPSTREAM_PATH}\n" + "".join(lines)


def _description(tag: str, condition: str) -> str:
    return (
        f"[Core] Scheduler: make the WAITING admission cap an overridable `{SEAM_METHOD}()`\n"
        "\n"
        f"What: `Scheduler.schedule()` (at {tag}) stops admitting WAITING requests when "
        f"`{condition}`. This PR moves that check, as written, into a new method "
        f"`Scheduler.{SEAM_METHOD}()`; the loop calls it.\n"
        "\n"
        "Why: schedulers that coordinate admission across data-parallel ranks need to change this one "
        "condition. vllm-ascend's balance scheduling pauses admission on every DP rank while any rank is "
        "at its cap; today it keeps a copy of the whole `schedule()` (~700 lines) re-applied at every "
        "vLLM release. With the seam it overrides one method.\n"
        "\n"
        "Behaviour: unchanged. The method returns exactly the condition it replaces (same count, "
        "operator and cap); no other line of `schedule()` changes. Verified by stepping the patched and "
        "the unpatched scheduler side by side on the same requests (chunked prefill, preemption, "
        "over-cap queues): identical SchedulerOutputs at every step.\n"
    )

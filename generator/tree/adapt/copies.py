"""Stale copies re-synced in one file's text: each copy's function replaced by its three-way merge.

The texts come from the tree's file (ours) and from the two releases' files (A's and B's function,
decorators included); ``judge.resync`` decides. A copy whose result is anything but ``Merged``
stays byte for byte as it was.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from generator.judge.census import newer_syntax
from generator.judge.couplings.sites import super_calls
from generator.judge.resync import Conflict, Merged, Result, resync
from generator.judge.resync.check import function_of
from generator.tree.adapt import fits, imports, setups
from generator.tree.adapt import span as spanned
from generator.tree.adapt.span import Span


@dataclass(frozen=True)
class CopyJob:
    """One copy to re-sync: where it starts in the tree's file, and upstream's function at A and B."""

    line: int  # the copy's ``def`` (or first decorator) line, as ``impact`` reports it
    upstream: str  # the vLLM function's name, for the report
    base: str
    theirs: str
    # B's class of a copied method: the names its lineage binds at class level, and what its methods assign
    # on self (None: not a method, or B's class is not read)
    members: frozenset[str] | None = None
    assigned: frozenset[str] = frozenset()
    owner: str = ""  # B's class's own name: does the tree's class derive from it, or copy it
    # what B's module binds once at its top, as the import statement binding it elsewhere (imports.providers)
    importable: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    module: str = ""  # B's module of the function: what its globals are (imports.Bindings)
    # B's class of a copied method: the attributes its methods other than ``__init__`` assign, and in which
    set_in: Mapping[str, frozenset[str]] = field(default_factory=dict, hash=False, compare=False)
    # B's class of a copied method: the chains under ``self`` it newly sets up, and in which methods (setups)
    set_up: setups.SetUp = field(default_factory=dict, hash=False, compare=False)
    owner_name: str = ""  # B's class's canonical name: is it in the lineage of the tree's class's vLLM bases


@dataclass(frozen=True)
class CopyOutcome:
    line: int
    upstream: str
    result: Result
    imports: tuple[str, ...] = ()  # the statements added to the file for this copy (what B's function reads)


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def function_span(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.AST) -> tuple[int, int]:
    """A def's first line (its first decorator's) and last line, 1-based."""
    decorators = getattr(node, "decorator_list", None) or []
    first = min([int(getattr(node, "lineno", 0)), *(d.lineno for d in decorators)])
    last: int = getattr(node, "end_lineno", None) or first
    return first, last


def function_text(lines: Sequence[str], node: ast.AST) -> str:
    first, last = function_span(node)
    return "".join(lines[first - 1 : last])


def resync_file(
    text: str, jobs: Sequence[CopyJob], bindings: imports.Bindings | None = None, span: Span | None = None
) -> tuple[str, list[CopyOutcome]]:
    """``text`` with every copy that merged replaced; one outcome per job, in the jobs' order.

    ``bindings``: what the file and B's modules bind names to: a statement taken from B that uses a name the
    file binds to another object than B's module does, in a way that object may not take, is a conflict
    (``fits.rebound``).

    A merged copy that reads a global the file does not bind, which B's module binds once at its top, is
    written with an import of it (``imports``) after the file's imports above the first copy written.

    ``span``: each merged copy is written beside the copy as it was, under the tree's version gate, and the
    imports it needs are run at B alone (``span``); with no gate helper, it is a conflict (never B's alone).
    """
    lines = text.splitlines(keepends=True)
    tree = newer_syntax.parse(text, "<tree>")[0]
    by_line: dict[int, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for func in _functions(tree):
        by_line.setdefault(func.lineno, func)
        by_line.setdefault(function_span(func)[0], func)
    outcomes: list[CopyOutcome] = []
    found_funcs: list[ast.FunctionDef | ast.AsyncFunctionDef | None] = []
    needs: list[dict[str, str]] = []
    replaced: list[tuple[int, int, str]] = []
    added: dict[str, str] = {}  # a name -> the import statement added for it
    for job in jobs:
        found = by_line.get(job.line)
        if found is None:
            outcomes.append(CopyOutcome(job.line, job.upstream, Conflict(f"no function starts at line {job.line}")))
            found_funcs.append(None)
            needs.append({})
            continue
        func = found
        ours = function_text(lines, func)
        result = resync(job.base, ours, job.theirs)
        needed: dict[str, str] = {}
        if isinstance(result, Merged):
            needed = _imports_for(tree, ours, result.text, job.importable)
            why = _clash(needed, {k: v for n in needs for k, v in n.items()}) or fits.problem(
                tree,
                func,
                ours,
                result.text,
                job.members,
                job.assigned,
                job.owner,
                job.importable,
                None if bindings is None else functools.partial(bindings.differ, job.module),
                job.set_in,
                _at_b(job, bindings),
            )
            if why:
                result, needed = Conflict(f"merge refused where the copy lives: {why}"), {}
        outcomes.append(CopyOutcome(job.line, job.upstream, result, tuple(sorted(set(needed.values())))))
        found_funcs.append(func)
        needs.append(needed)
    _hold_set_ups(tree, jobs, found_funcs, outcomes, bindings)
    for index, (copied, outcome, needed) in enumerate(zip(found_funcs, outcomes, needs, strict=True)):
        if copied is None or not isinstance(outcome.result, Merged):
            continue
        written = outcome.result.text
        if span is not None:
            gated = spanned.function(span, function_text(lines, copied), written) if span.helper else None
            if gated is None:
                why = "no gate helper in the tree" if not span.helper else "its text cannot be held under a gate"
                held = Conflict(f"under --span: {why}: left for a person, never written for B alone")
                outcomes[index] = CopyOutcome(outcome.line, outcome.upstream, held)
                continue
            written = gated
        replaced.append((*function_span(copied), written))
        added.update(needed)
    # Bottom up, so each span's line numbers still hold when it is replaced.
    for first, last, new in sorted(replaced, reverse=True):
        lines[first - 1 : last] = new.splitlines(keepends=True)
    out = "".join(lines)
    if added:  # above every copy replaced, so their lines did not move it
        first = _top_statement_line(tree, min(first for first, _, _ in replaced))
        statements = sorted(set(added.values()))
        out = imports.insert(out, [span.b_only(s) for s in statements] if span else statements, first)
    return out, outcomes


def _at_b(job: CopyJob, bindings: imports.Bindings | None) -> fits.VllmClasses | None:
    if bindings is None or not job.owner_name:
        return None
    return fits.VllmClasses(job.owner_name, bindings.vllm_class)


def _hold_set_ups(
    module: ast.Module,
    jobs: Sequence[CopyJob],
    funcs: Sequence[ast.FunctionDef | ast.AsyncFunctionDef | None],
    outcomes: list[CopyOutcome],
    bindings: imports.Bindings | None,
) -> None:
    """A merged method that newly reads what B's class sets up in another method is held (a conflict) unless
    the tree's class, as this run leaves it, sets it too (``setups``); held ones change what the run leaves,
    so the check runs again until nothing more is held."""
    while True:
        merged = {
            id(func): parsed
            for func, outcome in zip(funcs, outcomes, strict=True)
            if func is not None
            and isinstance(outcome.result, Merged)
            and (parsed := function_of(outcome.result.text)) is not None
        }
        held = False
        for index, (job, func) in enumerate(zip(jobs, funcs, strict=True)):
            if func is None or id(func) not in merged or not job.set_up:
                continue
            owner = fits.owner_of(module, func)
            if owner is None:
                continue
            classes = list(fits.family(module, owner))
            methods = {
                s.name: merged.get(id(s), s)
                for c in reversed(classes)
                for s in c.body
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
            merged_here = frozenset(
                name for name, m in methods.items() if m is not func and any(m is v for v in merged.values())
            )
            runs_base = {name: bool(super_calls(m)) for name, m in methods.items()}
            why = setups.needs(
                func,
                merged[id(func)],
                job.set_up,
                methods,
                merged_here,
                fits.derives(module, classes, job.owner, _at_b(job, bindings)),
                runs_base,
            )
            if why:
                result = Conflict(f"merge refused where the copy lives: {why}")
                outcomes[index] = CopyOutcome(job.line, job.upstream, result)
                held = True
        if not held:
            return


def _imports_for(module: ast.Module, ours: str, merged: str, importable: Mapping[str, str]) -> dict[str, str]:
    """The import statement binding each name the merged copy newly reads and the file lacks, where B's module
    provides every such name; {} otherwise (then ``fits`` names what is missing)."""
    mine, result = function_of(ours), function_of(merged)
    if mine is None or result is None:
        return {}
    names = fits.new_globals(module, mine, result) or set()
    if not names or any(n not in importable for n in names):
        return {}
    return {n: importable[n] for n in names}


def _clash(needed: Mapping[str, str], added: Mapping[str, str]) -> str:
    """Why one name cannot be imported for this copy: another copy in the file has it imported otherwise (their
    two B modules bind it to different things, and the file can bind it once)."""
    for name in sorted(needed):
        if name in added and added[name] != needed[name]:
            return f"B's function reads {name} as `{needed[name]}`, another copy in the file as `{added[name]}`"
    return ""


def _top_statement_line(module: ast.Module, line: int) -> int:
    """The first line (decorators included) of the module's top-level statement holding ``line``."""
    for stmt in module.body:
        first, last = function_span(stmt)
        if first <= line <= last:
            return first
    return line

"""``adapt``: the mechanical part of moving a tree from vLLM A to B, written all or nothing.

Also what ``bump --adapt`` joins to its own write: adapt's plan beside the copies the bump regenerates.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import click

from generator.cli import context
from generator.cli.context import source_options
from generator.cli.couplings import _package, compute, from_tag, layout_of, to_name
from generator.cli.root import root_option
from generator.errors import UsageError
from generator.judge.couplings.impact import Impact
from generator.tags import is_release_tag, tag_key
from generator.tree import vcs
from generator.tree.adapt import plan as planning
from generator.tree.adapt import write
from generator.tree.adapt.report import lines, work_left
from generator.tree.adapt.span import GATE_OPS, Span
from generator.tree.layout import Layout


def _only(given: str | None) -> tuple[str, ...]:
    if given is None:
        return planning.PARTS
    parts = tuple(p.strip() for p in given.split(",") if p.strip())
    unknown = [p for p in parts if p not in planning.PARTS]
    if unknown or not parts:
        raise UsageError(f"--only {given}: name some of {', '.join(planning.PARTS)}, comma-separated")
    return parts


@click.command()
@click.option("--from", "old", metavar="TAG", help="Release A: the one the tree runs with (default: its pin file).")
@click.option("--to", "new", metavar="TAG_OR_REF", help="Release B (default: the newest on the package index).")
@click.option("--dry-run", is_flag=True, help="Print the unified diff; write nothing (exits as the real run would).")
@click.option("--only", metavar="PARTS", help="names, copies, gates, signatures, comma-separated (default: all four).")
@click.option(
    "--allow-dirty", is_flag=True, help="Write even into files with uncommitted changes (their diff then mixes)."
)
@click.option(
    "--span", is_flag=True, help="Keep A: write each edit behind the tree's own version gate, A's form and B's."
)
@source_options
@root_option
def adapt(
    old: str | None,
    new: str | None,
    dry_run: bool,
    only: str | None,
    allow_dirty: bool,
    span: bool,
    source: str,
    vllm_repo: str | None,
) -> None:
    """Write into the tree what moving it from vLLM A to B takes mechanically; print what is left.

    Moved names are rewritten (imports, attribute paths, string targets); copies whose upstream
    function changed are merged three ways (A's function, the copy, B's) where the two sides'
    changes do not touch, and kept as they are where they do. All files or none. Exit 1 when
    work is left for a person (a conflict, a name not rewritten, a name gone): the rest is written.
    """
    parts = _only(only)
    layout = layout_of(context.root())
    sources = context.sources(source, vllm_repo)
    tag = from_tag(layout, old)
    target = to_name(new, tag, sources.kind, sources.vllm_repo)
    if is_release_tag(target) and tag_key(target) < tag_key(tag):
        raise UsageError(f"--to {target} is older than --from {tag}: adapt moves a tree forward; swap them")
    found = compute(layout, tag, target, sources)
    spanning = span_of(layout, found) if span else None
    plan = planning.build(found, _package(tag, sources), _package(target, sources), parts, span=spanning)
    if dry_run:
        click.echo(write.diff(plan, layout.root), nl=False)
    else:
        if not allow_dirty:
            refuse_dirty(plan.write)
        write.apply(plan)
    for line in lines(plan, written=not dry_run):
        click.echo(line, err=dry_run)
    if (left := work_left(plan, written=not dry_run)) is not None:
        raise left


def span_of(layout: Layout, found: Impact) -> Span:
    """The form ``--span`` writes in: A's and B's versions, and the tree's gate helper: the one declared in
    ``balance-patchgen.toml``, which the tree must define, else the one the tree's reading found (an ``is``
    helper before an ``at least`` one); none: imports spanned by ``try``/``except ImportError`` alone."""
    old, new = found.old.removeprefix("v"), found.new.removeprefix("v")
    if layout.gate_helper is not None:
        if layout.gate_helper not in found.helpers:
            raise UsageError(
                f"{layout.origin} [gates] helper {layout.gate_helper} is no function of the tree that asks vLLM's "
                "version (it must read vLLM's version and compare it with its one argument): fix the name"
            )
        return Span(old, new, layout.gate_helper, layout.gate_op)
    usable = sorted((op != "==", path) for path, op in found.helpers.items() if op in GATE_OPS)
    if not usable:
        return Span(old, new)
    path = usable[0][1]
    return Span(old, new, path, found.helpers[path])


def refuse_dirty(paths: Iterable[Path]) -> None:
    """One line, exit 2, when a file the write would change has uncommitted changes in its git working tree:
    every write into a tree is one reviewable, revertible diff (``--allow-dirty`` to go on)."""
    dirty = vcs.uncommitted(paths)
    if dirty:
        shown = ", ".join(dirty[:5]) + (f" (+{len(dirty) - 5} more)" if len(dirty) > 5 else "")
        raise UsageError(
            f"the files this would write have uncommitted changes: {shown}: commit or stash them first, so the"
            " write is a diff of its own, or pass --allow-dirty"
        )


def for_bump(
    layout: Layout, found: Impact, sources: context.SourceOptions, regenerated: Mapping[Path, bytes]
) -> planning.Plan:
    """Adapt's plan for a bump that also writes ``regenerated`` (the copies it regenerates, by path).

    The copies the bump regenerates are the generator's: adapt leaves their lines alone, and in a file
    holding one it rewrites names over the regenerated text, so one write carries both.
    """
    root = layout.root.resolve()
    texts = {
        p.resolve().relative_to(root).as_posix(): data.decode("utf-8")
        for p, data in regenerated.items()
        if p.resolve().is_relative_to(root)  # an --output outside the tree is no file of adapt's
    }
    return planning.build(
        found,
        _package(found.old, sources),
        _package(found.new, sources),
        regenerated=texts,
        regions=copy_regions(layout),
    )


def copy_regions(layout: Layout) -> dict[str, list[tuple[int, int]]]:
    """The lines (decorators to end) of each copy the layout declares, by file, as the file reads now."""
    out: dict[str, list[tuple[int, int]]] = {}
    for spec in layout.copies:
        path = layout.root / spec.destination
        try:
            tree = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue  # no copy there yet: nothing of adapt's to keep out
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == spec.dest_class):
            for func in cls.body:
                if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) and func.name == spec.dest_method:
                    first = min([func.lineno, *(d.lineno for d in func.decorator_list)])
                    out.setdefault(spec.destination.as_posix(), []).append((first, func.end_lineno or first))
    return out

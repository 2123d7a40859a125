"""``adapt``: the mechanical part of moving a tree from vLLM A to B, written all or nothing."""

from __future__ import annotations

import click

from generator.cli import context
from generator.cli.context import source_options
from generator.cli.couplings import _from_tag, _layout, _package, _to_name, compute
from generator.cli.root import root_option
from generator.errors import UsageError
from generator.tags import is_release_tag, tag_key
from generator.tree.adapt import plan as planning
from generator.tree.adapt import write
from generator.tree.adapt.report import lines


def _only(given: str | None) -> tuple[str, ...]:
    if given is None:
        return planning.PARTS
    parts = tuple(p.strip() for p in given.split(",") if p.strip())
    unknown = [p for p in parts if p not in planning.PARTS]
    if unknown or not parts:
        raise UsageError(f"--only {given}: name one or both of {', '.join(planning.PARTS)}, comma-separated")
    return parts


@click.command()
@click.option("--from", "old", metavar="TAG", help="Release A: the one the tree runs with (default: its pin file).")
@click.option("--to", "new", metavar="TAG_OR_REF", help="Release B (default: the newest on the package index).")
@click.option("--dry-run", is_flag=True, help="Print the unified diff; write nothing.")
@click.option("--only", metavar="PARTS", help="names, copies, or both (default: both).")
@source_options
@root_option
def adapt(
    old: str | None, new: str | None, dry_run: bool, only: str | None, source: str, vllm_repo: str | None
) -> None:
    """Write into the tree what moving it from vLLM A to B takes mechanically; print what is left.

    Moved names are rewritten (imports, attribute paths, string targets); copies whose upstream
    function changed are merged three ways (A's function, the copy, B's) where the two sides'
    changes do not touch, and kept as they are where they do. All files or none.
    """
    parts = _only(only)
    layout = _layout(context.root())
    sources = context.sources(source, vllm_repo)
    tag = _from_tag(layout, old)
    target = _to_name(new, tag, sources.kind, sources.vllm_repo)
    if is_release_tag(target) and tag_key(target) < tag_key(tag):
        raise UsageError(f"--to {target} is older than --from {tag}: adapt moves a tree forward; swap them")
    found = compute(layout, tag, target, sources)
    plan = planning.build(found, _package(tag, sources), _package(target, sources), parts)
    if dry_run:
        click.echo(write.diff(plan, layout.root), nl=False)
    else:
        write.apply(plan)
    for line in lines(plan, written=not dry_run):
        click.echo(line, err=dry_run)

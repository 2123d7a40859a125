"""``seam``: the upstream change that ends the copy (Phase 2B)."""

from __future__ import annotations

from pathlib import Path

import click

from generator.atomic import require_regular_or_absent, write_all_or_nothing
from generator.builder import seam
from generator.cli import context
from generator.cli.context import source_options
from generator.cli.root import root_option


@click.command(name="seam")
@click.option("--tag", help="Release tag to write the change against (default: the pin file).")
@source_options
@click.option(
    "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the diff to this file instead of stdout."
)
@root_option
def seam_cmd(tag: str | None, source: str, vllm_repo: str | None, output: Path | None) -> None:
    """Print the upstream change that ends the copy: the cap check as Scheduler._should_stop_admitting_waiting().

    The diff goes to stdout (pipe it to `git apply` in a vLLM checkout at the tag) or --output;
    the pull request's description goes to stderr, or to stdout with --output.
    """
    tag = context.pinned_or(tag)
    if output is not None:
        require_regular_or_absent(output, what="--output")
    made = seam.make_seam(context.sources(source, vllm_repo).fetch(tag))
    if output is None:
        click.echo(made.diff, nl=False)
        click.echo(made.description, err=True, nl=False)
        return
    write_all_or_nothing({output: made.diff.encode()})
    click.echo(made.description, nl=False)

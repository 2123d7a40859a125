"""``couplings`` and ``impact``: every place a tree depends on vLLM, and what a move between releases does to each."""

from __future__ import annotations

import time
from pathlib import Path

import click

from generator.cli import context
from generator.cli.context import source_options
from generator.cli.root import root_option
from generator.errors import UsageError
from generator.judge.couplings import commits, registry, report
from generator.judge.couplings.impact import Impact, run
from generator.pins.pin import read_pin
from generator.sources import package
from generator.sources.package import Package
from generator.sources.releases import released_tags
from generator.sources.resolve import SourceKind, git_location
from generator.tags import is_release_tag, validate_ref, validate_tag
from generator.tree.layout import Layout, detect


def layout_of(root: Path) -> Layout:
    if not root.is_dir():
        raise UsageError(f"--root {root} is not a folder: pass the plugin's source tree")
    return detect(root)


def from_tag(layout: Layout, given: str | None) -> str:
    if given is not None:
        return validate_tag(given, origin="--from")
    pin = layout.root / layout.pin
    if not pin.exists():
        raise UsageError(
            f"{layout.root} has no {layout.pin}: pass --from TAG, the vLLM release the tree runs with (e.g. v0.30.0)"
        )
    return read_pin(pin)


def to_name(given: str | None, old: str, kind: SourceKind, vllm_repo: str | None) -> str:
    if given is None:
        tags = released_tags(old)
        if not tags:
            raise UsageError(f"the package index lists no vLLM release from {old} on: pass --to TAG")
        return tags[-1]
    if is_release_tag(given):
        return given
    ref = validate_ref(given, origin="--to")
    git_location(ref, kind, vllm_repo)  # a branch or commit needs a git source: refused before any reading
    return ref


def _package(name: str, sources: context.SourceOptions) -> Package:
    location = git_location(name, sources.kind, sources.vllm_repo, optional=True)
    if location is not None:
        return package.git_ref(name, location, context.progress)
    return package.release(name, context.progress, refresh=sources.refresh)


def _commits(sources: context.SourceOptions, old: Package, new: Package) -> commits.Commits | None:
    """With a git source, what finds the commits from A to B that touched a changed definition."""
    location = git_location(new.label, sources.kind, sources.vllm_repo, True)
    if location is None:
        return None
    return commits.reader(location, _git_name(old), _git_name(new))


def _git_name(found: Package) -> str:
    """A package's revision as git names it: the tag, or the commit of ``branch@commit12``."""
    return found.label.rpartition("@")[2] if "@" in found.label else f"refs/tags/{found.label}"


def compute(layout: Layout, old: str, new: str, sources: context.SourceOptions) -> Impact:
    """The impact on ``layout``'s tree of moving from release ``old`` to ``new`` (a release or a git ref)."""
    declared: list[registry.Declared] = []
    read_registry = None
    if layout.registry is not None and (layout.root / layout.registry.file).is_file():
        read_registry = layout.registry.file.as_posix()
        text = (layout.root / layout.registry.file).read_text(encoding="utf-8", errors="replace")
        declared += registry.read(text, layout.registry)
    if layout.declared:
        spec = layout.root / "balance-patchgen.toml"
        text = spec.read_text(encoding="utf-8", errors="replace") if spec.is_file() else ""
        declared += registry.listed(list(layout.declared), "balance-patchgen.toml", text)
        read_registry = read_registry or "balance-patchgen.toml"
    clock = time.monotonic()
    a, b = _package(old, sources), _package(new, sources)
    reads = time.monotonic() - clock
    found = run(
        layout.root,
        a,
        b,
        paths=layout.couplings_paths,
        declared=declared,
        registry=read_registry,
        commits=_commits(sources, a, b),
        progress=context.progress,
    )
    found.seconds = {"upstream reads": reads, **found.seconds}
    return found


def some_python(found: Impact) -> Impact:
    context.progress(report.timing_line(found))
    if not found.files:
        reason = (
            f" ({len(found.skipped)} skipped: {found.skipped[0].path} {found.skipped[0].reason})"
            if found.skipped
            else ""
        )
        raise UsageError(f"{found.root} holds no Python file that parses{reason}: pass the plugin's source tree")
    return found


_FORMATS = ("text", "json", "markdown", "github")


@click.command()
@click.option("--from", "old", metavar="TAG", help="The vLLM release the tree runs with (default: its pin file).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@source_options
@root_option
def couplings(old: str | None, fmt: str, source: str, vllm_repo: str | None) -> None:
    """Every place the tree couples to vLLM: copies, patches, overrides, imports, declared symbols.

    Each with its site (file:line) and the vLLM name it depends on, resolved through the file's
    imports and aliases, and where that release defines it; what cannot be resolved statically is
    listed as unresolved, with why.
    """
    layout = layout_of(context.root())
    sources = context.sources(source, vllm_repo)
    tag = from_tag(layout, old)
    found = some_python(compute(layout, tag, tag, sources))
    if fmt == "json":
        click.echo(report.to_json_text(found), nl=False)
        return
    for line in report.couplings_lines(found):
        click.echo(line)


@click.command()
@click.option("--from", "old", metavar="TAG", help="Release A: the one the tree runs with (default: its pin file).")
@click.option(
    "--to",
    "new",
    metavar="TAG_OR_REF",
    help="Release B (default: the newest on the package index); a branch or commit (main) with a git source.",
)
@click.option("--format", "fmt", type=click.Choice(_FORMATS), default="text", show_default=True)
@click.option("--all", "everything", is_flag=True, help="Text: list the info couplings too (breaks, review lead).")
@source_options
@root_option
def impact(old: str | None, new: str | None, fmt: str, everything: bool, source: str, vllm_repo: str | None) -> None:
    """What moving the tree from vLLM A to B does to each of its couplings.

    For each: unchanged, changed (signature, body, value, members), moved (named), removed, added,
    redundant (a copy equal to B's function), unresolved (with why); and a verdict, with the rule that
    gave it: breaks, review, info (docs/impact.md). Upstream's own diff of each changed definition, and
    with a git source the commits that touched it.
    """
    layout = layout_of(context.root())
    sources = context.sources(source, vllm_repo)
    tag = from_tag(layout, old)
    found = some_python(compute(layout, tag, to_name(new, tag, sources.kind, sources.vllm_repo), sources))
    if fmt == "json":
        click.echo(report.to_json_text(found), nl=False)
    elif fmt == "markdown":
        click.echo(report.markdown(found), nl=False)
    elif fmt == "github":
        for line in report.summary_lines(found) + report.github_lines(found):
            click.echo(line)
    else:
        for line in report.text_lines(found, everything=everything):
            click.echo(line)

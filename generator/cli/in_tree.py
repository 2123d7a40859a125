"""A consumer's tree (``--root TREE``): its copies are regions of its own files (``generator.tree.adopt``)."""

from __future__ import annotations

from pathlib import Path

import click

from generator.atomic import require_regular_or_absent, write_all_or_nothing
from generator.builder import verify
from generator.cli import context
from generator.errors import DriftFound, UsageError
from generator.judge import provenance
from generator.judge.provenance import FIRST_RELEASE, Release
from generator.sources.base import UpstreamFile
from generator.sources.releases import released_tags
from generator.sources.resolve import SourceKind
from generator.tree import adopt


def regen(upstream: UpstreamFile, *, pin: tuple[Path, str] | None = None) -> None:
    """Regenerate every copy the tree declares; write the files (and the pin, for bump) all or nothing."""
    files = regenerated(upstream)
    if pin is not None:
        files[pin[0]] = f"{pin[1]}\n".encode()
    write_all_or_nothing(files)
    if pin is not None:
        n = len(context.layout().copies)
        click.echo(f"pinned {pin[1]} and regenerated {n} copies; review, then commit them together")


def regenerated(upstream: UpstreamFile) -> dict[Path, bytes]:
    """Every copy the tree declares regenerated, said copy by copy: the files that change, written by the caller."""
    layout = context.layout()
    results = adopt.regenerate(layout, upstream)
    for result in results:
        for built in result.copies:
            if built.kept:
                click.echo(f"{result.path}: {built.spec.label} is {built.summary}")
                continue
            state = "regenerated" if built.changed else "already up to date:"
            click.echo(f"{result.path}: {state} {built.spec.label} from vLLM {upstream.tag} ({built.summary})")
            if built.outside:
                click.echo(f"{result.path}: changed outside the copy, because vLLM {upstream.tag}'s copy needs it:")
                context.echo_diff(built.outside)
            for note in built.notes:
                click.echo(f"{result.path}: {note}")
        for line in adopt.dropped_edits(result, upstream, _releases):
            click.echo(f"{result.path}: {line}")
    return {layout.root / r.path: r.new.encode() for r in results if r.changed}


def _releases() -> list[Release]:
    """Every release since the first vllm-ascend carried, for migrate's scan (cached reads)."""
    sources = context.sources(SourceKind.AUTO.value, None)
    return [Release(t, sources.fetch(t).text) for t in released_tags(FIRST_RELEASE)]


def check(upstream: UpstreamFile, fmt: str) -> None:
    layout = context.layout()
    results = adopt.regenerate(layout, upstream)
    for result in results:
        for built in result.copies:
            if built.kept:  # never fails the gate, never silent either
                click.echo(f"{result.path}: {built.spec.label} is {built.summary}")
    found = adopt.drifts(results, upstream.tag)
    if not found:
        n = len(layout.copies)
        click.echo(f"{n} cop{'ies' if n != 1 else 'y'} in {layout.root} up to date with vLLM {upstream.tag}")
        return
    for drift_found in found:
        context.echo_diff(drift_found.diff)
        if len(found) > 1:
            click.echo(f"balance-patchgen: drift: {drift_found.cause}", err=True)
        if fmt == "github":
            click.echo(f"::error file={drift_found.path}::{drift_found.cause}")
    raise DriftFound(found[0].cause if len(found) == 1 else f"{len(found)} copies drifted (listed above)")


def verify_copy(file: Path | None, upstream: UpstreamFile) -> None:
    layout = context.layout()
    spec = layout.balance()
    path = file if file is not None else layout.root / spec.destination
    require_regular_or_absent(path, what="FILE")
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {path} as UTF-8 text ({error}): pass the tree's patch file") from None
    verified = verify.verify_copy(text, upstream.text, class_name=spec.dest_class)
    click.echo(f"{path}: {spec.label} is upstream {upstream.tag} plus exactly {verified.summary}")


def main_verified(tagged: UpstreamFile, main: UpstreamFile) -> None:
    """Whether the pin's schedule(), what the tree's copies are made of, is still main-verified's."""
    layout = context.layout()
    labels = ", ".join(c.label for c in layout.copies if adopt.present(layout, c))
    runs = provenance.edits(provenance.upstream_method(tagged.text), provenance.upstream_method(main.text))
    if not runs:
        click.echo(
            f"upstream {tagged.tag}'s schedule() is main-verified {main.tag}'s, statement for statement ({labels})"
        )
        return
    n = sum(r.statements for r in runs)
    click.echo(
        f"upstream {tagged.tag}'s schedule() ({labels}) differs from main-verified {main.tag}'s in {n} statements:"
    )
    for run in runs:
        click.echo(f"  {run.describe(main.tag)}")

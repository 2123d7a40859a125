"""``regen``, ``check`` and ``verify``: build the copy, gate it against drift, check it independently.

This project's layout keeps one generated module; a tree keeps marked regions (``in_tree``), whose stage
(``generator.tree``, its judges, the release listing) is imported only for a tree: a warm ``check`` of the
module is the drift gate's hot path, measured against its floor (docs/benchmarks.md).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import click

from generator.atomic import require_regular_or_absent, write_all_or_nothing
from generator.builder import pipeline, seam, verify
from generator.cli import context
from generator.cli.context import DEFAULT_OUTPUT, MAIN_VERIFIED_OUTPUT, source_options
from generator.cli.root import root_option
from generator.errors import DriftFound, UsageError, VerificationFailed
from generator.judge import check as drift


def _in_tree() -> ModuleType:
    from generator.cli import in_tree  # a tree's commands: see the module's text

    return in_tree


@click.command()
@click.option("--tag", help="Release tag to generate from (default: the pin file).")
@source_options
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help=f"Default: {DEFAULT_OUTPUT}.")
@context.main_verified_option
@root_option
def regen(tag: str | None, source: str, vllm_repo: str | None, output: Path | None, main_verified: bool) -> None:
    """Generate for the pinned tag (or --tag) and write the module (in a tree: every copy it declares)."""
    if main_verified:
        return _main_verified_regen(source, vllm_repo, tag, output)
    tag = context.pinned_or(tag)
    if context.layout().is_tree:
        context.no_output_in_tree(output)
        return _in_tree().regen(context.sources(source, vllm_repo).fetch(tag))
    path = context.output_path(output)
    upstream = context.sources(source, vllm_repo, module=path).fetch(tag)
    if (reason := seam.no_copy_reason(upstream)) is not None:
        if path.exists():
            path.unlink()
            reason += f"; removed {output or DEFAULT_OUTPUT}"
        click.echo(reason)
        return
    text = pipeline.build_verified(upstream).text
    write_all_or_nothing({path: text.encode()})
    click.echo(f"wrote {output or DEFAULT_OUTPUT} from vLLM {tag} (upstream sha256 {upstream.sha256[:12]})")


def _main_verified_regen(source: str, vllm_repo: str | None, tag: str | None, output: Path | None) -> None:
    """This project's module for the main-verified commit, beside the pin's (read with a git source)."""
    if tag is not None:
        raise UsageError("pass --tag or --main-verified, not both: the main-verified commit is in its file")
    if context.layout().is_tree:
        raise UsageError("a tree keeps one copy, for its pin: `check --main-verified` compares it with main-verified")
    upstream = context.sources(source, vllm_repo).fetch_ref(context.main_verified_ref())
    path = context.output_path(output or MAIN_VERIFIED_OUTPUT)
    write_all_or_nothing({path: pipeline.build_verified(upstream).text.encode()})
    click.echo(
        f"wrote {output or MAIN_VERIFIED_OUTPUT} from vLLM {upstream.tag} (upstream sha256 {upstream.sha256[:12]})"
    )


@click.command()
@click.option("--tag", help="Release tag to compare against (default: the pin file).")
@source_options
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help=f"Default: {DEFAULT_OUTPUT}.")
@click.option("--format", "fmt", type=click.Choice(["text", "github"]), default="text", show_default=True)
@context.main_verified_option
@root_option
def check(
    tag: str | None, source: str, vllm_repo: str | None, output: Path | None, fmt: str, main_verified: bool
) -> None:
    """Regenerate in memory and compare with the committed module (exit 1 on drift)."""
    tag = context.pinned_or(tag)
    if context.layout().is_tree:
        context.no_output_in_tree(output)
        sources = context.sources(source, vllm_repo)
        upstream = sources.fetch(tag)
        if main_verified:
            return _in_tree().main_verified(upstream, sources.fetch_ref(context.main_verified_ref()))
        return _in_tree().check(upstream, fmt)
    if main_verified:
        upstream = context.sources(source, vllm_repo).fetch_ref(context.main_verified_ref())
        output = output or MAIN_VERIFIED_OUTPUT
        tag = upstream.tag
    path = context.output_path(output)
    shown = str(output or DEFAULT_OUTPUT)
    upstream = upstream if main_verified else context.sources(source, vllm_repo, module=path).fetch(tag)
    if (reason := seam.no_copy_reason(upstream)) is not None:
        if path.exists():
            raise context.stale(shown, reason)
        click.echo(f"{reason}: nothing to check")
        return
    fresh = pipeline.generate(upstream)
    committed = path.read_bytes() if path.exists() else None
    found = drift.compare(committed, fresh, path=shown, tag=tag, upstream_sha256=upstream.sha256)
    if found is None:
        click.echo(f"{shown} is up to date with vLLM {tag}")
        return
    if found.diff:
        context.echo_diff(found.diff)
    if fmt == "github":
        click.echo(f"::error file={shown},line={found.first_line}::{found.cause}")
    raise DriftFound(found.cause)


@click.command(name="verify")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--tag", help="Release tag to verify against (default: the pin file).")
@source_options
@root_option
def verify_cmd(file: Path | None, tag: str | None, source: str, vllm_repo: str | None) -> None:
    """Check independently that FILE's schedule() minus the deltas is upstream's."""
    tag = context.pinned_or(tag)
    if context.layout().is_tree:
        return _in_tree().verify_copy(file, context.sources(source, vllm_repo).fetch(tag))
    path = file if file is not None else context.root() / DEFAULT_OUTPUT
    require_regular_or_absent(path, what="FILE")
    try:
        data = path.read_bytes()
    except OSError:
        raise UsageError(f"cannot read {path}: pass an existing generated module, or run `make regen`") from None
    upstream = context.sources(source, vllm_repo, module=path).fetch(tag)
    if (reason := seam.no_copy_reason(upstream)) is not None:
        raise VerificationFailed(f"{path} is stale: {reason}; run `make regen` to remove it")
    text = drift.module_text(data, path=str(path), tag=tag, upstream=upstream.data, upstream_sha256=upstream.sha256)
    verified = verify.verify(text, upstream.text)
    click.echo(f"{file or DEFAULT_OUTPUT}: schedule() is upstream {tag} plus exactly {verified.summary}")

"""``balance-patchgen``: a thin click shell over the pure core. Exit codes live here and only here."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from generator import check as drift
from generator import extract, pipeline, verify
from generator.atomic import write_all_or_nothing
from generator.errors import (
    DeltaDoesNotApply,
    DriftFound,
    PatchgenError,
    SourceUnavailable,
    UpstreamShapeError,
    UsageError,
    VerificationFailed,
)
from generator.pin import PIN_FILE, read_pin, validate_tag
from generator.sources.base import UpstreamFile
from generator.sources.resolve import SourceKind, fetch_upstream

DEFAULT_OUTPUT = Path("generated/balance_scheduler.py")

# The documented exit codes (README "Exit codes"); checked in order, most specific first.
EXIT_CODES: tuple[tuple[type[PatchgenError], int], ...] = (
    (DriftFound, 1),
    (VerificationFailed, 1),
    (UsageError, 2),
    (SourceUnavailable, 3),
    (DeltaDoesNotApply, 4),
    (UpstreamShapeError, 4),
)

F = TypeVar("F", bound=Callable[..., Any])


def exit_code_for(error: PatchgenError) -> int:
    return next(code for cls, code in EXIT_CODES if isinstance(error, cls))


def _fail(error: PatchgenError) -> NoReturn:
    click.echo(f"balance-patchgen: error: {error}", err=True)
    if error.detail:
        click.echo(error.detail, err=True)
    sys.exit(exit_code_for(error))


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PatchgenError as error:
            _fail(error)
        except OSError as error:  # e.g. a read-only or full disk while writing: still one line, exit 2
            where = f" {error.filename}" if error.filename else ""
            _fail(UsageError(f"cannot access{where} ({error.strerror or error}): check the path and its permissions"))


@dataclass(frozen=True)
class SourceOptions:
    kind: SourceKind
    vllm_repo: str | None

    def fetch(self, tag: str) -> UpstreamFile:
        return fetch_upstream(tag, self.kind, self.vllm_repo, progress=_progress)


def _progress(message: str) -> None:
    click.echo(f"balance-patchgen: {message}", err=True)


def source_options(func: F) -> F:
    func = click.option(
        "--vllm-repo",
        metavar="PATH_OR_URL",
        help="vLLM git checkout or URL (default: $VLLM_REPO); implies --source git under auto.",
    )(func)
    func = click.option(
        "--source",
        "source",
        type=click.Choice([k.value for k in SourceKind]),
        default=SourceKind.AUTO.value,
        show_default=True,
        help="Where upstream scheduler.py comes from.",
    )(func)
    return func


def _sources(source: str, vllm_repo: str | None) -> SourceOptions:
    return SourceOptions(SourceKind(source), vllm_repo)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Repository root holding .github/ and generated/.",
)
@click.pass_context
def main(ctx: click.Context, root: Path) -> None:
    """Generate vllm-ascend's balance scheduler from vLLM's Scheduler.schedule() at the pinned tag."""
    ctx.obj = root


def _root() -> Path:
    root: Path = click.get_current_context().find_root().obj
    return root


def _pinned_or(tag: str | None) -> str:
    return validate_tag(tag, origin="--tag") if tag is not None else read_pin(_root() / PIN_FILE)


def _output_path(output: Path | None) -> Path:
    path = _root() / (output or DEFAULT_OUTPUT)
    if not path.parent.is_dir():
        raise UsageError(f"output folder {path.parent} does not exist: create it or pass --output")
    return path


def _generate_verified(upstream: UpstreamFile) -> str:
    text = pipeline.generate(upstream)
    # Never write what the independent check rejects: a generator bug must not reach the tree.
    verify.verify(text, upstream.text)
    return text


@main.command()
@click.option("--tag", help="Release tag to generate from (default: the pin file).")
@source_options
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help=f"Default: {DEFAULT_OUTPUT}.")
def regen(tag: str | None, source: str, vllm_repo: str | None, output: Path | None) -> None:
    """Generate for the pinned tag (or --tag) and write the module."""
    tag = _pinned_or(tag)
    path = _output_path(output)
    upstream = _sources(source, vllm_repo).fetch(tag)
    text = _generate_verified(upstream)
    write_all_or_nothing({path: text.encode()})
    click.echo(f"wrote {output or DEFAULT_OUTPUT} from vLLM {tag} (upstream sha256 {upstream.sha256[:12]})")


@main.command(name="check")
@click.option("--tag", help="Release tag to compare against (default: the pin file).")
@source_options
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help=f"Default: {DEFAULT_OUTPUT}.")
@click.option("--format", "fmt", type=click.Choice(["text", "github"]), default="text", show_default=True)
def check_cmd(tag: str | None, source: str, vllm_repo: str | None, output: Path | None, fmt: str) -> None:
    """Regenerate in memory and compare with the committed module (exit 1 on drift)."""
    tag = _pinned_or(tag)
    path = _output_path(output)
    shown = str(output or DEFAULT_OUTPUT)
    upstream = _sources(source, vllm_repo).fetch(tag)
    fresh = pipeline.generate(upstream)
    committed = path.read_text(encoding="utf-8") if path.exists() else None
    found = drift.compare(committed, fresh, path=shown, tag=tag, upstream_sha256=upstream.sha256)
    if found is None:
        click.echo(f"{shown} is up to date with vLLM {tag}")
        return
    if found.diff:
        _echo_diff(found.diff)
    if fmt == "github":
        click.echo(f"::error file={shown},line={found.first_line}::{found.cause}")
    raise DriftFound(found.cause)


def _echo_diff(diff: str) -> None:
    colours = {"+": "green", "-": "red", "@": "cyan"}
    for line in diff.splitlines():
        # click.echo drops the colour codes when stdout is not a terminal.
        colour = None if line.startswith(("+++", "---")) else colours.get(line[:1])
        click.echo(click.style(line, fg=colour) if colour else line)


@main.command(name="verify")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--tag", help="Release tag to verify against (default: the pin file).")
@source_options
def verify_cmd(file: Path | None, tag: str | None, source: str, vllm_repo: str | None) -> None:
    """Check independently that FILE's schedule() minus the deltas is upstream's."""
    tag = _pinned_or(tag)
    path = file if file is not None else _root() / DEFAULT_OUTPUT
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        raise UsageError(f"cannot read {path}: pass an existing generated module, or run `make regen`") from None
    upstream = _sources(source, vllm_repo).fetch(tag)
    verified = verify.verify(text, upstream.text)
    click.echo(f"{file or DEFAULT_OUTPUT}: schedule() is upstream {tag} plus exactly {verified.summary}")


@main.command()
@click.argument("new_tag")
@source_options
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help=f"Default: {DEFAULT_OUTPUT}.")
def bump(new_tag: str, source: str, vllm_repo: str | None, output: Path | None) -> None:
    """Move the pin to NEW_TAG: show upstream's schedule() diff, regenerate, write pin and module together."""
    new_tag = validate_tag(new_tag, origin="NEW_TAG")
    pin_path = _root() / PIN_FILE
    old_tag = read_pin(pin_path)
    path = _output_path(output)
    sources = _sources(source, vllm_repo)
    old, new = sources.fetch(old_tag), sources.fetch(new_tag)
    old_method, new_method = _method_text(old), _method_text(new)
    if old_method == new_method:
        click.echo(f"upstream Scheduler.schedule() is identical in {old_tag} and {new_tag}")
    else:
        click.echo(f"upstream Scheduler.schedule() changed from {old_tag} to {new_tag}:")
        _echo_diff(drift.unified_diff(old_method, new_method, f"schedule@{old_tag}", f"schedule@{new_tag}"))
    text = _generate_verified(new)
    write_all_or_nothing({pin_path: f"{new_tag}\n".encode(), path: text.encode()})
    click.echo(f"pinned {new_tag} and wrote {output or DEFAULT_OUTPUT}; review, then commit both")


def _method_text(upstream: UpstreamFile) -> str:
    module = extract.parse(upstream.text, upstream.tag)
    return module.code_for_node(extract.extract(module, upstream.tag).method)


@main.command()
@click.argument("tags", nargs=-1)
@click.option("--since", metavar="TAG", help="Also every final release on the package index from TAG on.")
@source_options
def matrix(tags: tuple[str, ...], since: str | None, source: str, vllm_repo: str | None) -> None:
    """For each tag: do the deltas apply and verify? Writes nothing."""
    sources = _sources(source, vllm_repo)
    worst: PatchgenError | None = None
    for tag in tags:
        validate_tag(tag, origin="tag")
    if since is not None:
        from generator.sources.releases import released_tags

        tags = (*tags, *(t for t in released_tags(validate_tag(since, origin="--since")) if t not in tags))
    if not tags:
        raise UsageError("matrix needs release tags: pass TAG... or --since TAG")
    for tag in tags:
        try:
            upstream = sources.fetch(tag)
            verified = verify.verify(pipeline.generate(upstream), upstream.text)
            status = f"ok: {verified.summary}; the leader is asked `{verified.check}`"
        except (SourceUnavailable, DeltaDoesNotApply, UpstreamShapeError, VerificationFailed) as error:
            status = f"FAIL ({type(error).__name__}): {error}"
            if worst is None or exit_code_for(error) > exit_code_for(worst):
                worst = error
        click.echo(f"{tag:<12} {status}")
    if worst is not None:
        sys.exit(exit_code_for(worst))

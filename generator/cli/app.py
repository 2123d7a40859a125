"""``balance-patchgen``: a thin click shell over the pure core. Exit codes live here and only here."""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from generator import __version__, adopt, pin_bump, pipeline, plan, verify
from generator import check as drift
from generator import matrix as matrix_rows
from generator.atomic import is_same_file, require_regular_or_absent, write_all_or_nothing
from generator.errors import (
    DeltaDoesNotApply,
    DriftFound,
    EditDoesNotApply,
    FileRefused,
    PatchgenError,
    SourceUnavailable,
    UpstreamShapeError,
    UsageError,
    VerificationFailed,
)
from generator.layout import Layout, detect, require_tree
from generator.pin import PIN_FILE, is_release_tag, read_pin, validate_tag
from generator.provenance import FIRST_RELEASE
from generator.refs import MAIN_VERIFIED_FILE, read_main_verified, validate_ref
from generator.sources.base import UpstreamFile
from generator.sources.resolve import SourceKind, check_refs, fetch_ref, fetch_upstream

DEFAULT_OUTPUT = Path("generated/balance_scheduler.py")
# The module for the vLLM main commit vllm-ascend's CI runs (.github/vllm-main-verified.commit); the runtime
# imports whichever generated module matches the installed scheduler.py.
MAIN_VERIFIED_OUTPUT = Path("generated/balance_scheduler_main_verified.py")

# The documented exit codes (docs/cli.md, "Exit codes"); checked in order, most specific first.
EXIT_CODES: tuple[tuple[type[PatchgenError], int], ...] = (
    (DriftFound, 1),
    (VerificationFailed, 1),
    (UsageError, 2),
    (SourceUnavailable, 3),
    (DeltaDoesNotApply, 4),
    (EditDoesNotApply, 4),
    (UpstreamShapeError, 4),
)

# Failures that are no typed error (docs/cli.md, "Exit codes"): 5 is never a user's fault, 130 is the shell's
# convention for SIGINT, so scripts can tell "interrupted" from "drift".
EXIT_BUG = 5
EXIT_INTERRUPTED = 130

F = TypeVar("F", bound=Callable[..., Any])


def exit_code_for(error: PatchgenError) -> int:
    return next(code for cls, code in EXIT_CODES if isinstance(error, cls))


def _fail(error: PatchgenError) -> NoReturn:
    click.echo(f"balance-patchgen: error: {error}", err=True)
    if error.detail:
        click.echo(error.detail, err=True)
    sys.exit(exit_code_for(error))


def _fail_line(message: str, code: int) -> NoReturn:
    click.echo(f"balance-patchgen: error: {message}", err=True)
    sys.exit(code)


def _os_error(error: OSError) -> UsageError:
    """One line for a read or write the operating system refused, naming the file and the fix."""
    where = f" {error.filename}" if error.filename else ""
    reason = error.strerror or str(error)
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return UsageError(f"no space left to write{where} ({reason}): free space on that disk, then run again")
    if error.errno == errno.EFBIG:
        return UsageError(f"cannot write{where} ({reason}): raise the file size limit (ulimit -f), then run again")
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return UsageError(f"cannot access{where} ({reason}): check the path and its permissions")
    return UsageError(f"cannot access{where} ({reason}): check the path, the disk and its permissions")


class _Group(click.Group):
    def main(self, *args: Any, **kwargs: Any) -> Any:
        # click's standalone mode prints a multi-line usage block and maps Ctrl-C to exit 1 (the drift
        # code); handle both here so every failure is one line with a documented code.
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as error:
            error.show()
            sys.exit(error.exit_code)
        except click.UsageError as error:
            where = error.ctx.command_path if error.ctx else "balance-patchgen"
            _fail_line(f"{error.format_message().rstrip('.')}: see `{where} --help`", error.exit_code)
        except click.ClickException as error:
            _fail_line(f"{error.format_message().rstrip('.')}: see `balance-patchgen --help`", error.exit_code)
        except click.Abort:
            _fail_line("interrupted: run the command again (files are written all or nothing)", EXIT_INTERRUPTED)
        sys.exit(result if isinstance(result, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PatchgenError as error:
            _fail(error)
        except OSError as error:  # e.g. a read-only or full disk while writing: still one line, exit 2
            _fail(_os_error(error))
        except MemoryError:
            # Hostile input (a huge or endless file) is the usual cause, so this is bad input, not a bug.
            _fail(UsageError("out of memory: check that the files and options given are the ones you meant"))
        except KeyboardInterrupt:
            _fail_line("interrupted: run the command again (files are written all or nothing)", EXIT_INTERRUPTED)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as error:
            # Last resort: anything untyped is a defect of the generator, never drift (1) or bad input (2).
            if os.environ.get("BALANCE_PATCHGEN_TRACEBACK"):
                traceback.print_exc()
            first = (str(error).splitlines() or [""])[0]
            _fail_line(
                f"unexpected {type(error).__name__}: {first}: this is a bug, please report it with the command "
                "you ran (set BALANCE_PATCHGEN_TRACEBACK=1 for the traceback)",
                EXIT_BUG,
            )


@dataclass(frozen=True)
class SourceOptions:
    kind: SourceKind
    vllm_repo: str | None
    refresh: bool = False
    # The module whose header records upstream's sha256 for its tag (None: nothing to hold sources to).
    module: Path | None = None

    def fetch(self, tag: str) -> UpstreamFile:
        return fetch_upstream(
            tag,
            self.kind,
            self.vllm_repo,
            progress=_progress,
            recorded_sha256=_recorded_sha256(self.module, tag),
            refresh=self.refresh,
        )

    def fetch_ref(self, ref: str) -> UpstreamFile:
        return fetch_ref(ref, self.kind, self.vllm_repo, progress=_progress)


def _recorded_sha256(module: Path | None, tag: str) -> str | None:
    """The upstream sha256 the module's header records, if the header is for ``tag``."""
    if module is None or not module.is_file():
        return None
    with module.open("rb") as handle:
        head = handle.read(16 * 1024).decode("utf-8", errors="replace")
    header = drift.header_fields(head)
    return header.get("sha256") if header.get("tag") == tag else None


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
    func = click.option(
        "--refresh",
        is_flag=True,
        expose_value=False,  # read through the context, so commands need no extra parameter
        callback=_remember_refresh,
        help="Ignore the cached upstream file and fetch it from the package index again.",
    )(func)
    return func


def _remember_refresh(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    ctx.meta["balance_patchgen.refresh"] = value
    return value


def _sources(source: str, vllm_repo: str | None, module: Path | None = None) -> SourceOptions:
    refresh = bool(click.get_current_context().meta.get("balance_patchgen.refresh", False))
    return SourceOptions(SourceKind(source), vllm_repo, refresh=refresh, module=module)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="balance-patchgen", message="%(prog)s %(version)s")
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


def _layout() -> Layout:
    """What the root holds (layout.detect), read once per command."""
    meta = click.get_current_context().find_root().meta
    if "balance_patchgen.layout" not in meta:
        detected = detect(_root())
        if (
            not detected.is_tree
            and not (_root() / PIN_FILE).exists()
            and not (_root() / DEFAULT_OUTPUT).parent.is_dir()
        ):
            require_tree(detected)  # a --root holding nothing the tool knows: say so, not "no pin file"
        meta["balance_patchgen.layout"] = detected
    found: Layout = meta["balance_patchgen.layout"]
    return found


def _pin_path() -> Path:
    return _root() / _layout().pin


def _pinned_or(tag: str | None) -> str:
    return validate_tag(tag, origin="--tag") if tag is not None else read_pin(_pin_path())


def _no_output_in_tree(output: Path | None) -> None:
    if output is not None:
        raise UsageError(
            f"--output is for this project's generated module; {_layout().origin} says where each copy goes: "
            "drop --output"
        )


def _output_path(output: Path | None) -> Path:
    path = _root() / (output or DEFAULT_OUTPUT)
    if not path.parent.is_dir():
        if output is None and _root() != Path("."):
            require_tree(_layout())  # a --root that is neither a tree nor this project's layout
        raise UsageError(f"output folder {path.parent} does not exist: create it or pass --output")
    if is_same_file(path, _root() / PIN_FILE):
        raise FileRefused(f"--output {path} is the pin file: pass the module's path (default {DEFAULT_OUTPUT})")
    require_regular_or_absent(path, what="--output")
    return path


def _seam_release(upstream: UpstreamFile) -> str | None:
    """Where upstream has the seam, why no copy is needed (the runtime overrides the method instead)."""
    from generator import seam

    return seam.no_copy_reason(upstream)


def _stale(shown: str, reason: str) -> DriftFound:
    return DriftFound(f"{shown} is stale: {reason}; run `make regen` to remove it")


def _main_verified_option(func: F) -> F:
    return click.option(
        "--main-verified",
        is_flag=True,
        help=f"The vLLM commit in {MAIN_VERIFIED_FILE} instead of the pin (a git source): "
        f"this project's {MAIN_VERIFIED_OUTPUT}; in a tree, check compares the copies' upstream with it.",
    )(func)


@main.command()
@click.option("--tag", help="Release tag to generate from (default: the pin file).")
@source_options
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help=f"Default: {DEFAULT_OUTPUT}.")
@_main_verified_option
def regen(tag: str | None, source: str, vllm_repo: str | None, output: Path | None, main_verified: bool) -> None:
    """Generate for the pinned tag (or --tag) and write the module (in a tree: every copy it declares)."""
    if main_verified:
        return _main_verified_regen(source, vllm_repo, tag, output)
    tag = _pinned_or(tag)
    if _layout().is_tree:
        _no_output_in_tree(output)
        return _tree_regen(_sources(source, vllm_repo).fetch(tag))
    path = _output_path(output)
    upstream = _sources(source, vllm_repo, module=path).fetch(tag)
    if (reason := _seam_release(upstream)) is not None:
        if path.exists():
            path.unlink()
            reason += f"; removed {output or DEFAULT_OUTPUT}"
        click.echo(reason)
        return
    text = pipeline.build_verified(upstream).text
    write_all_or_nothing({path: text.encode()})
    click.echo(f"wrote {output or DEFAULT_OUTPUT} from vLLM {tag} (upstream sha256 {upstream.sha256[:12]})")


@main.command(name="check")
@click.option("--tag", help="Release tag to compare against (default: the pin file).")
@source_options
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help=f"Default: {DEFAULT_OUTPUT}.")
@click.option("--format", "fmt", type=click.Choice(["text", "github"]), default="text", show_default=True)
@_main_verified_option
def check_cmd(
    tag: str | None, source: str, vllm_repo: str | None, output: Path | None, fmt: str, main_verified: bool
) -> None:
    """Regenerate in memory and compare with the committed module (exit 1 on drift)."""
    tag = _pinned_or(tag)
    if _layout().is_tree:
        _no_output_in_tree(output)
        sources = _sources(source, vllm_repo)
        upstream = sources.fetch(tag)
        if main_verified:
            return _tree_main_verified(upstream, sources.fetch_ref(_main_verified_ref()))
        return _tree_check(upstream, fmt)
    if main_verified:
        upstream = _sources(source, vllm_repo).fetch_ref(_main_verified_ref())
        output = output or MAIN_VERIFIED_OUTPUT
        tag = upstream.tag
    path = _output_path(output)
    shown = str(output or DEFAULT_OUTPUT)
    upstream = upstream if main_verified else _sources(source, vllm_repo, module=path).fetch(tag)
    if (reason := _seam_release(upstream)) is not None:
        if path.exists():
            raise _stale(shown, reason)
        click.echo(f"{reason}: nothing to check")
        return
    fresh = pipeline.generate(upstream)
    committed = path.read_bytes() if path.exists() else None
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
    if _layout().is_tree:
        return _tree_verify(file, _sources(source, vllm_repo).fetch(tag))
    path = file if file is not None else _root() / DEFAULT_OUTPUT
    require_regular_or_absent(path, what="FILE")
    try:
        data = path.read_bytes()
    except OSError:
        raise UsageError(f"cannot read {path}: pass an existing generated module, or run `make regen`") from None
    upstream = _sources(source, vllm_repo, module=path).fetch(tag)
    if (reason := _seam_release(upstream)) is not None:
        raise VerificationFailed(f"{path} is stale: {reason}; run `make regen` to remove it")
    text = drift.module_text(data, path=str(path), tag=tag, upstream=upstream.data, upstream_sha256=upstream.sha256)
    verified = verify.verify(text, upstream.text)
    click.echo(f"{file or DEFAULT_OUTPUT}: schedule() is upstream {tag} plus exactly {verified.summary}")


def _plan_option(func: F) -> F:
    return click.option(
        "--plan",
        "plan_file",
        metavar="FILE",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Write what automation should do to FILE as JSON (docs/pin-bump.md); touch nothing else.",
    )(func)


def _plan_path(plan_file: Path, module: Path) -> Path:
    if not plan_file.parent.is_dir():
        raise UsageError(f"--plan folder {plan_file.parent} does not exist: create it or pass another path")
    for other, what in ((_root() / PIN_FILE, "the pin file"), (module, "the generated module")):
        if is_same_file(plan_file, other):
            raise FileRefused(f"--plan {plan_file} is {what}: pass a path of its own, e.g. plan.json")
    require_regular_or_absent(plan_file, what="--plan")
    return plan_file


def _write_plan(plan_file: Path, made: plan.Plan) -> None:
    write_all_or_nothing({plan_file: plan.dumps(made).encode()})
    click.echo(f"wrote {plan_file}: {made['summary']}")


@main.command()
@click.argument("new_tag", required=False)
@click.option("--latest", is_flag=True, help="The newest final release on the package index newer than the pin.")
@_plan_option
@source_options
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help=f"Default: {DEFAULT_OUTPUT}.")
@click.pass_context
def bump(
    ctx: click.Context,
    new_tag: str | None,
    latest: bool,
    plan_file: Path | None,
    source: str,
    vllm_repo: str | None,
    output: Path | None,
) -> None:
    """Move the pin to NEW_TAG (or --latest): show upstream's schedule() diff, write pin and module together."""
    if new_tag is None and not latest:
        raise click.MissingParameter(ctx=ctx, param=ctx.command.params[0], param_hint="'NEW_TAG'")
    if new_tag is not None and latest:
        raise UsageError(f"pass NEW_TAG or --latest, not both: `bump {new_tag}` or `bump --latest`")
    pin_path = _pin_path()
    old_tag = read_pin(pin_path)
    tree_layout = _layout().is_tree
    if tree_layout:
        _no_output_in_tree(output)
    path = _root() / DEFAULT_OUTPUT if tree_layout else _output_path(output)
    if plan_file is not None:
        plan_file = _plan_path(plan_file, path)
    if new_tag is None:
        from generator.sources.releases import newest_release

        new_tag = newest_release(old_tag)
        if new_tag is None:
            if plan_file is not None:
                _write_plan(plan_file, plan.up_to_date(old_tag))
            else:
                click.echo(f"{old_tag} is the newest vLLM release on the package index: nothing to do")
            return
        click.echo(f"the newest vLLM release on the package index is {new_tag} (pinned: {old_tag})")
    new_tag = validate_tag(new_tag, origin="NEW_TAG")
    sources = _sources(source, vllm_repo, module=path)
    old, new = sources.fetch(old_tag), sources.fetch(new_tag)
    if plan_file is not None:
        _write_plan(plan_file, _bump_plan(sources, old, new))
        return
    method_diff = pin_bump.method_diff(old, new)
    if not method_diff:
        click.echo(f"upstream Scheduler.schedule() is identical in {old_tag} and {new_tag}")
    else:
        click.echo(f"upstream Scheduler.schedule() changed from {old_tag} to {new_tag}:")
        _echo_diff(method_diff)
    if tree_layout:
        return _tree_regen(new, pin=(pin_path, new_tag))
    if (reason := _seam_release(new)) is not None:
        # The module goes first, the pin last (as below): a kill between leaves a missing module
        # under the old pin, which `check` reports.
        if path.exists():
            path.unlink()
        write_all_or_nothing({pin_path: f"{new_tag}\n".encode()})
        click.echo(f"pinned {new_tag}; {reason}, so {output or DEFAULT_OUTPUT} is removed; review, then commit")
        return
    text = pipeline.build_verified(new).text
    # Module first, pin last: a kill between the two renames leaves the new module under the old pin,
    # a state `check` recognises and names the fix for (finish with `bump NEW_TAG`).
    write_all_or_nothing({path: text.encode(), pin_path: f"{new_tag}\n".encode()})
    click.echo(f"pinned {new_tag} and wrote {output or DEFAULT_OUTPUT}; review, then commit both")


def _bump_plan(sources: SourceOptions, old: UpstreamFile, new: UpstreamFile) -> plan.Plan:
    """The plan for a bump from ``old`` to ``new``: computed like the bump itself, written nowhere but the plan."""
    if new.tag == old.tag:
        return plan.up_to_date(old.tag)
    rows = [matrix_rows.row(tag, partial(sources.fetch, tag)) for tag in pin_bump.releases_between(old.tag, new.tag)]
    method_diff = ""  # stays empty when upstream's schedule() cannot even be found to diff
    try:
        # Inside: a release without Scheduler.schedule() is an issue to open, like a delta that fails.
        method_diff = pin_bump.method_diff(old, new)
        reason = _seam_release(new)
        outcomes = () if reason is not None else pipeline.build_verified(new).outcomes
    except matrix_rows.PLANNED_ERRORS as error:
        return plan.blocked(old.tag, new.tag, method_diff=method_diff, error=error, rows=rows)
    return plan.bumped(old.tag, new.tag, method_diff=method_diff, outcomes=outcomes, no_copy_reason=reason, rows=rows)


@main.command()
@click.argument("tags", nargs=-1, metavar="[TAG_OR_REF]...")
@click.option("--since", metavar="TAG", help="Also every final release on the package index from TAG on.")
@click.option(
    "--main-verified",
    is_flag=True,
    help=f"Also the vLLM commit in {MAIN_VERIFIED_FILE} (needs a git source).",
)
@_plan_option
@source_options
def matrix(
    tags: tuple[str, ...],
    since: str | None,
    main_verified: bool,
    plan_file: Path | None,
    source: str,
    vllm_repo: str | None,
) -> None:
    """For each release tag, or git branch/commit (git source): do the deltas apply and verify? Writes only --plan."""
    sources = _sources(source, vllm_repo)
    asked = [name if is_release_tag(name) else validate_ref(name, origin="TAG_OR_REF") for name in tags]
    if main_verified:
        asked.append(read_main_verified(_root() / MAIN_VERIFIED_FILE))
    named = list(asked)  # what an issue's title names (stable): the releases --since adds are not named
    if since is not None:
        from generator.sources.releases import released_tags

        asked += [t for t in released_tags(validate_tag(since, origin="--since")) if t not in asked]
    if not asked:
        raise UsageError("matrix needs release tags or git refs: pass TAG_OR_REF..., --since TAG or --main-verified")
    refs = [name for name in asked if not is_release_tag(name)]
    check_refs(refs, SourceKind(source), vllm_repo)  # refused before any line is printed
    if plan_file is not None:
        plan_file = _plan_path(plan_file, _root() / DEFAULT_OUTPUT)
    rows = []
    for name in asked:
        fetch = partial(sources.fetch_ref, name) if name in refs else partial(sources.fetch, name)
        rows.append(matrix_rows.row(name, fetch))
        click.echo(rows[-1].line)
    failed = [r.error for r in rows if r.error is not None]
    if plan_file is not None and all(isinstance(e, matrix_rows.PLANNED_ERRORS) for e in failed):
        _write_plan(plan_file, plan.matrix_plan(named or [f"releases since {since}"], rows))
        return
    if failed:
        sys.exit(max(exit_code_for(e) for e in failed))


@main.command(name="seam")
@click.option("--tag", help="Release tag to write the change against (default: the pin file).")
@source_options
@click.option(
    "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the diff to this file instead of stdout."
)
def seam_cmd(tag: str | None, source: str, vllm_repo: str | None, output: Path | None) -> None:
    """Print the upstream change that ends the copy: the cap check as Scheduler._should_stop_admitting_waiting().

    The diff goes to stdout (pipe it to `git apply` in a vLLM checkout at the tag) or --output;
    the pull request's description goes to stderr, or to stdout with --output.
    """
    from generator import seam

    tag = _pinned_or(tag)
    if output is not None:
        require_regular_or_absent(output, what="--output")
    made = seam.make_seam(_sources(source, vllm_repo).fetch(tag))
    if output is None:
        click.echo(made.diff, nl=False)
        click.echo(made.description, err=True, nl=False)
        return
    write_all_or_nothing({output: made.diff.encode()})
    click.echo(made.description, nl=False)


@main.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--tag", help="vLLM release the copy runs with (default: the pin file).")
@click.option(
    "--since",
    default=FIRST_RELEASE,
    show_default=True,
    metavar="TAG",
    help="When the copy is not that release's, scan every final release from TAG on for the one it is.",
)
@source_options
def migrate(file: Path, tag: str | None, since: str, source: str, vllm_repo: str | None) -> None:
    """Judge a hand-kept copy: its deltas, which release it is (or the closest), its extra edits.

    Exit 0 when it is the tag's schedule() plus the deltas and nothing else (the generated module
    can replace it), 1 otherwise.
    """
    from generator.migrate import judge
    from generator.provenance import Release
    from generator.sources.releases import released_tags

    tag = _pinned_or(tag)
    since = validate_tag(since, origin="--since")
    if file is None:
        if not _layout().is_tree:
            raise UsageError("migrate needs FILE (the hand-kept copy), or --root a vllm-ascend tree")
        file = _root() / _layout().balance().destination
    require_regular_or_absent(file, what="FILE")
    try:
        text = file.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {file} as UTF-8 text ({error}): pass the hand-kept module") from None
    sources = _sources(source, vllm_repo)
    upstream = sources.fetch(tag)
    report = judge(text, tag, upstream.text, lambda: [Release(t, sources.fetch(t).text) for t in released_tags(since)])
    for line in report.lines():
        click.echo(f"{file}: {line}")
    if not report.replaceable:
        raise VerificationFailed(
            f"{file} is not upstream {tag}'s schedule() plus the balance deltas alone ({report.verdict}, "
            f"{len(report.extra_edits)} extra edits): regenerate it for {tag} and carry the extra edits elsewhere"
        )
    click.echo(f"{file}: replace it with the generated module (`make regen`); formatting differences need no review")


# `census`: every copy of a vLLM function a tree holds (generator/census.py owns its options and output).
from generator.census import census_command  # noqa: E402 - after the group it joins

main.add_command(census_command())


# --- A consumer's tree (--root TREE): its copies are regions of its own files (generator/adopt.py).


def _tree_regen(upstream: UpstreamFile, *, pin: tuple[Path, str] | None = None) -> None:
    """Regenerate every copy the tree declares; write the files (and the pin, for bump) all or nothing."""
    layout = _layout()
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
                _echo_diff(built.outside)
            for note in built.notes:
                click.echo(f"{result.path}: {note}")
        for line in adopt.dropped_edits(result, upstream, _releases):
            click.echo(f"{result.path}: {line}")
    files = {layout.root / r.path: r.new.encode() for r in results if r.changed}
    if pin is not None:
        files[pin[0]] = f"{pin[1]}\n".encode()
    write_all_or_nothing(files)
    if pin is not None:
        click.echo(f"pinned {pin[1]} and regenerated {len(layout.copies)} copies; review, then commit them together")


def _releases() -> list[Any]:
    """Every release since the first vllm-ascend carried, for migrate's scan (cached reads)."""
    from generator.provenance import Release
    from generator.sources.releases import released_tags

    sources = _sources(SourceKind.AUTO.value, None)
    return [Release(t, sources.fetch(t).text) for t in released_tags(FIRST_RELEASE)]


def _tree_check(upstream: UpstreamFile, fmt: str) -> None:
    layout = _layout()
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
        _echo_diff(drift_found.diff)
        if len(found) > 1:
            click.echo(f"balance-patchgen: drift: {drift_found.cause}", err=True)
        if fmt == "github":
            click.echo(f"::error file={drift_found.path}::{drift_found.cause}")
    raise DriftFound(found[0].cause if len(found) == 1 else f"{len(found)} copies drifted (listed above)")


def _tree_verify(file: Path | None, upstream: UpstreamFile) -> None:
    layout = _layout()
    spec = layout.balance()
    path = file if file is not None else layout.root / spec.destination
    require_regular_or_absent(path, what="FILE")
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {path} as UTF-8 text ({error}): pass the tree's patch file") from None
    verified = verify.verify_copy(text, upstream.text, class_name=spec.dest_class)
    click.echo(f"{path}: {spec.label} is upstream {upstream.tag} plus exactly {verified.summary}")


def _main_verified_ref() -> str:
    return read_main_verified(_root() / _layout().main_verified)


def _main_verified_regen(source: str, vllm_repo: str | None, tag: str | None, output: Path | None) -> None:
    """This project's module for the main-verified commit, beside the pin's (read with a git source)."""
    if tag is not None:
        raise UsageError("pass --tag or --main-verified, not both: the main-verified commit is in its file")
    if _layout().is_tree:
        raise UsageError("a tree keeps one copy, for its pin: `check --main-verified` compares it with main-verified")
    upstream = _sources(source, vllm_repo).fetch_ref(_main_verified_ref())
    path = _output_path(output or MAIN_VERIFIED_OUTPUT)
    write_all_or_nothing({path: pipeline.build_verified(upstream).text.encode()})
    click.echo(
        f"wrote {output or MAIN_VERIFIED_OUTPUT} from vLLM {upstream.tag} (upstream sha256 {upstream.sha256[:12]})"
    )


def _tree_main_verified(tagged: UpstreamFile, main: UpstreamFile) -> None:
    """Whether the pin's schedule(), what the tree's copies are made of, is still main-verified's."""
    from generator import provenance

    layout = _layout()
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

"""``bump`` and ``matrix``: move the pin, or ask of each release whether the copy still builds there."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import click

from generator.atomic import is_same_file, require_regular_or_absent, write_all_or_nothing
from generator.builder import pipeline, seam
from generator.cli import adapt as adapt_cli
from generator.cli import context, couplings, in_tree
from generator.cli import explain as explain_cli
from generator.cli.context import DEFAULT_OUTPUT, SourceOptions, source_options
from generator.cli.exits import exit_code_for
from generator.cli.root import root_option
from generator.errors import FileRefused, PatchgenError, UsageError
from generator.judge.couplings import report
from generator.judge.couplings.impact import Impact
from generator.judge.explain import report as explain_report
from generator.judge.explain.explained import explain as explain_run
from generator.judge.explain.outcomes import SuiteRun
from generator.pins import matrix as matrix_rows
from generator.pins import pin_bump, plan
from generator.pins.pin import PIN_FILE, read_pin
from generator.pins.refs import MAIN_VERIFIED_FILE, read_main_verified
from generator.sources.base import UpstreamFile
from generator.sources.releases import newest_release, released_tags
from generator.sources.resolve import SourceKind, check_refs
from generator.tags import is_release_tag, validate_ref, validate_tag
from generator.tree import adopt
from generator.tree import specs as shipped_specs
from generator.tree.adapt import report as adapt_report
from generator.tree.adapt import write as adapt_write

F = TypeVar("F", bound=Callable[..., Any])
# The pull request body's share for the impact section (the body's limit is GitHub's; upstream's diff gets the rest).
IMPACT_BODY_LIMIT = 20_000
# adapt's section (bump --adapt): what is left, and its diff folded; the plan's `adapt.diff` holds the whole diff.
ADAPT_BODY_LIMIT = 15_000
EXPLAIN_BODY_LIMIT = 12_000


def _swept(upstream: UpstreamFile) -> list[tuple[str, PatchgenError | None]]:
    return [(s.line, s.error) for s in shipped_specs.sweeps(upstream)]


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
    for other, what in ((context.root() / PIN_FILE, "the pin file"), (module, "the generated module")):
        if is_same_file(plan_file, other):
            raise FileRefused(f"--plan {plan_file} is {what}: pass a path of its own, e.g. plan.json")
    require_regular_or_absent(plan_file, what="--plan")
    return plan_file


def _write_plan(plan_file: Path, made: plan.Plan) -> None:
    write_all_or_nothing({plan_file: plan.dumps(made).encode()})
    click.echo(f"wrote {plan_file}: {made['summary']}")


@click.command()
@click.argument("new_tag", required=False)
@click.option("--latest", is_flag=True, help="The newest final release on the package index newer than the pin.")
@_plan_option
@source_options
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help=f"Default: {DEFAULT_OUTPUT}.")
@click.option(
    "--impact/--no-impact",
    "with_impact",
    default=True,
    show_default=True,
    help="Also say what the move does to the tree's couplings to vLLM (docs/impact.md).",
)
@click.option(
    "--adapt",
    "with_adapt",
    is_flag=True,
    help="Also write adapt's mechanical part of the move, in the same all-or-nothing write (docs/adapt.md).",
)
@click.option("--allow-dirty", is_flag=True, help="With --adapt: write even into files with uncommitted changes.")
@click.option(
    "--results",
    multiple=True,
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --plan: the tree's test run at the new tag (JUnit XML, as `explain` reads it): its failures, "
    "named by their couplings, go into the plan and the pull request body. Repeatable.",
)
@root_option
@click.pass_context
def bump(
    ctx: click.Context,
    new_tag: str | None,
    latest: bool,
    plan_file: Path | None,
    source: str,
    vllm_repo: str | None,
    output: Path | None,
    with_impact: bool,
    with_adapt: bool,
    allow_dirty: bool,
    results: tuple[Path, ...],
) -> None:
    """Move the pin to NEW_TAG (or --latest): show upstream's schedule() diff, write pin and module together."""
    if new_tag is None and not latest:
        raise click.MissingParameter(ctx=ctx, param=ctx.command.params[0], param_hint="'NEW_TAG'")
    if new_tag is not None and latest:
        raise UsageError(f"pass NEW_TAG or --latest, not both: `bump {new_tag}` or `bump --latest`")
    pin_path = context.pin_path()
    old_tag = read_pin(pin_path)
    tree_layout = context.layout().is_tree
    if tree_layout:
        context.no_output_in_tree(output)
    path = context.root() / DEFAULT_OUTPUT if tree_layout else context.output_path(output)
    if plan_file is not None:
        plan_file = _plan_path(plan_file, path)
    if results and plan_file is None:
        raise UsageError("--results goes with --plan (the plan carries what they say); or run `explain` on them")
    runs = explain_cli.read_runs(results, None, context.root()) if results else None
    if new_tag is None:
        new_tag = newest_release(old_tag)
        if new_tag is None:
            if plan_file is not None:
                _write_plan(plan_file, plan.up_to_date(old_tag))
            else:
                click.echo(f"{old_tag} is the newest vLLM release on the package index: nothing to do")
            return
        click.echo(f"the newest vLLM release on the package index is {new_tag} (pinned: {old_tag})")
    new_tag = validate_tag(new_tag, origin="NEW_TAG")
    sources = context.sources(source, vllm_repo, module=path)
    old, new = sources.fetch(old_tag), sources.fetch(new_tag)
    if plan_file is not None:
        _write_plan(plan_file, _bump_plan(sources, old, new, with_impact, with_adapt, runs))
        return
    method_diff = pin_bump.method_diff(old, new)
    if not method_diff:
        click.echo(f"upstream Scheduler.schedule() is identical in {old_tag} and {new_tag}")
    else:
        click.echo(f"upstream Scheduler.schedule() changed from {old_tag} to {new_tag}:")
        context.echo_diff(method_diff)
    # Read only until the one write below: a failure anywhere before it leaves every file, the pin included.
    reason = None
    if tree_layout:
        files = in_tree.regenerated(new)
        n = len(context.layout().copies)
        done = f"pinned {new_tag} and regenerated {n} copies; review, then commit them together"
    elif (reason := seam.no_copy_reason(new)) is not None:
        files = {}
        done = f"pinned {new_tag}; {reason}, so {output or DEFAULT_OUTPUT} is removed; review, then commit"
    else:
        files = {path: pipeline.build_verified(new).text.encode()}
        done = f"pinned {new_tag} and wrote {output or DEFAULT_OUTPUT}; review, then commit both"
    # After the copies are built: a delta or edit that fails (exit 4) stops the bump before impact's pass.
    found = couplings.compute(context.layout(), old_tag, new_tag, sources) if with_adapt else None
    adapted = adapt_cli.for_bump(context.layout(), found, sources, files) if found is not None else None
    if adapted is not None:
        # A file both change is adapt's text, which starts from the regenerated one.
        files.update(adapt_write.checked(adapted))
        if not allow_dirty:  # what adapt writes into the tree's own code is one reviewable diff
            adapt_cli.refuse_dirty(adapted.write)
    if reason is not None and path.exists():
        # The module goes first, the pin last: a kill between leaves a missing module under the old pin,
        # which `check` reports.
        path.unlink()
    # Module (and adapt's files) first, pin last: a kill between the renames leaves the new files under the
    # old pin, a state `check` recognises and names the fix for (finish with `bump NEW_TAG`).
    write_all_or_nothing({**files, pin_path: f"{new_tag}\n".encode()})
    click.echo(done)
    if adapted is not None:
        for line in adapt_report.lines(adapted, written=True):
            click.echo(line)
    _echo_impact(old_tag, new_tag, sources, with_impact, found)
    if adapted is not None and (left := adapt_report.work_left(adapted)) is not None:
        raise left


def _echo_impact(old: str, new: str, sources: SourceOptions, with_impact: bool, found: Impact | None) -> None:
    """After the bump is written: what it does to the tree's couplings (read only; nothing more is written)."""
    if not with_impact:
        return
    click.echo(f"what vLLM {old} -> {new} does to the tree's couplings:")
    for line in report.bump_lines(
        found if found is not None else couplings.compute(context.layout(), old, new, sources)
    ):
        click.echo(line)


def _bump_plan(
    sources: SourceOptions,
    old: UpstreamFile,
    new: UpstreamFile,
    with_impact: bool,
    with_adapt: bool,
    runs: tuple[SuiteRun, SuiteRun | None, list[str]] | None = None,
) -> plan.Plan:
    """The plan for a bump from ``old`` to ``new``: computed like the bump itself, written nowhere but the plan.
    ``runs`` (``--results``): the tree's test run at ``new``, explained against the same impact."""
    if new.tag == old.tag:
        return plan.up_to_date(old.tag)
    rows = [matrix_rows.row(tag, partial(sources.fetch, tag)) for tag in pin_bump.releases_between(old.tag, new.tag)]
    layout = context.layout()
    # A tree with its own balance-patchgen.toml bumps with its own specs, not the shipped ones.
    swept = shipped_specs.sweeps(new) if layout.kind != "declared" else []
    wanted = with_impact or with_adapt or runs is not None
    found = couplings.compute(layout, old.tag, new.tag, sources) if wanted else None
    summary = report.summary_json(found) if found and with_impact else None
    section = report.markdown(found, limit=IMPACT_BODY_LIMIT) if found and with_impact else ""
    explained: dict[str, Any] = {}
    if found is not None and runs is not None:
        impact = report.to_json(couplings.some_python(found))
        made_run = explain_run(layout.root, impact, *runs)
        explained["explain"] = explain_report.to_json(made_run)
        explained["explain_markdown"] = explain_report.markdown(made_run, impact, limit=EXPLAIN_BODY_LIMIT)
    adapted: dict[str, Any] = {}
    if found is not None and with_adapt:
        # Adapt's part alone (the copies the bump regenerates are kept out of it): what `bump --adapt` adds.
        made = adapt_cli.for_bump(layout, found, sources, {})
        diff = adapt_write.diff(made, layout.root)
        adapted = {
            "adapt": adapt_report.to_json(made, diff),
            "adapt_markdown": adapt_report.markdown(made, diff, limit=ADAPT_BODY_LIMIT),
        }
    method_diff = ""  # stays empty when upstream's schedule() cannot even be found to diff
    try:
        # Inside: a release without Scheduler.schedule() is an issue to open, like a delta that fails.
        method_diff = pin_bump.method_diff(old, new)
        reason = None if layout.is_tree else seam.no_copy_reason(new)
        if layout.is_tree:
            # The tree's copies as `bump` regenerates them: an edit or delta that fails there is the issue.
            adopt.regenerate(layout, new)
        balance = not layout.is_tree or any(c.is_balance for c in layout.copies)
        outcomes = pipeline.build_verified(new).outcomes if reason is None and balance else ()
    except matrix_rows.PLANNED_ERRORS as error:
        failure: PatchgenError | None = error
    else:
        # a tree bumping to the tag would meet exit 4 in a spec the tool ships: an issue first
        failure = next((s.error for s in swept if s.error is not None), None)
    if failure is not None:
        return plan.blocked(
            old.tag,
            new.tag,
            method_diff=method_diff,
            error=failure,
            rows=rows,
            impact=summary,
            impact_markdown=section,
            **explained,
        )
    return plan.bumped(
        old.tag,
        new.tag,
        method_diff=method_diff,
        outcomes=outcomes,
        no_copy_reason=reason,
        rows=rows,
        impact=summary,
        impact_markdown=section,
        specs=[s.line for s in swept],
        **adapted,
        **explained,
    )


@click.command()
@click.argument("tags", nargs=-1, metavar="[TAG_OR_REF]...")
@click.option("--since", metavar="TAG", help="Also every final release on the package index from TAG on.")
@click.option(
    "--main-verified",
    is_flag=True,
    help=f"Also the vLLM commit in {MAIN_VERIFIED_FILE} (needs a git source).",
)
@click.option("--specs", "with_specs", is_flag=True, help="Also sweep the specs the tool ships (`specs sweep`).")
@_plan_option
@source_options
@root_option
def matrix(
    tags: tuple[str, ...],
    since: str | None,
    main_verified: bool,
    with_specs: bool,
    plan_file: Path | None,
    source: str,
    vllm_repo: str | None,
) -> None:
    """For each release tag, or git branch/commit (git source): do the deltas apply and verify? Writes only --plan."""
    sources = context.sources(source, vllm_repo)
    asked = [name if is_release_tag(name) else validate_ref(name, origin="TAG_OR_REF") for name in tags]
    if main_verified:
        asked.append(read_main_verified(context.root() / MAIN_VERIFIED_FILE))
    named = list(asked)  # what an issue's title names (stable): the releases --since adds are not named
    if since is not None:
        asked += [t for t in released_tags(validate_tag(since, origin="--since")) if t not in asked]
    if not asked:
        raise UsageError("matrix needs release tags or git refs: pass TAG_OR_REF..., --since TAG or --main-verified")
    refs = [name for name in asked if not is_release_tag(name)]
    check_refs(refs, SourceKind(source), vllm_repo)  # refused before any line is printed
    if plan_file is not None:
        plan_file = _plan_path(plan_file, context.root() / DEFAULT_OUTPUT)
    rows = []
    for name in asked:
        fetch = partial(sources.fetch_ref, name) if name in refs else partial(sources.fetch, name)
        for row in matrix_rows.rows(name, fetch, _swept if with_specs else None):
            rows.append(row)
            click.echo(row.line)
    failed = [r.error for r in rows if r.error is not None]
    if plan_file is not None and all(isinstance(e, matrix_rows.PLANNED_ERRORS) for e in failed):
        _write_plan(plan_file, plan.matrix_plan(named or [f"releases since {since}"], rows))
        return
    if failed:
        sys.exit(max(exit_code_for(e) for e in failed))

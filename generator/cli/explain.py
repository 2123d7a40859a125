"""``explain``: a plugin's test run (its CI's JUnit XML) read against ``impact``, each failure named by its coupling."""

from __future__ import annotations

from pathlib import Path

import click

from generator.cli import context
from generator.cli.context import source_options
from generator.cli.couplings import compute, from_tag, layout_of, some_python, to_name
from generator.cli.root import root_option
from generator.errors import UsageError
from generator.judge.couplings import report as impact_report
from generator.judge.explain import junit, report
from generator.judge.explain.explained import explain as explain_run
from generator.judge.explain.outcomes import SuiteRun


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--from", "old", metavar="TAG", help="Release A: the one the tree runs with (default: its pin file).")
@click.option(
    "--to", "new", metavar="TAG_OR_REF", help="Release B, the run's vLLM (default: the newest on the package index)."
)
@click.option(
    "--at-from",
    "at_from",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The same suite run at A (JUnit XML): a test failing there too is the tree's own, not the bump's.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "markdown", "github", "json"]), default="text", show_default=True
)
@source_options
@root_option
def explain(
    results: tuple[Path, ...],
    old: str | None,
    new: str | None,
    at_from: Path | None,
    fmt: str,
    source: str,
    vllm_repo: str | None,
) -> None:
    """Which failing tests of RESULTS (pytest's --junitxml, --tb=short or longer) the bump made fail, and
    through which coupling: each failure named by the couplings `impact` (A -> B) says it hit, grouped by error,
    breaks first, with upstream's diff of each definition (docs/suite.md, "explain")."""
    root = context.root()
    runs = read_runs(results, at_from, root)  # the files first: a bad one is refused before impact's work
    layout = layout_of(root)
    sources = context.sources(source, vllm_repo)
    tag = from_tag(layout, old)
    found = some_python(compute(layout, tag, to_name(new, tag, sources.kind, sources.vllm_repo), sources))
    impact = impact_report.to_json(found)
    explained = explain_run(root, impact, *runs)
    if fmt == "json":
        click.echo(report.to_json_text(explained), nl=False)
    elif fmt == "markdown":
        click.echo(report.markdown(explained, impact), nl=False)
    elif fmt == "github":
        for line in report.github_lines(explained, impact):
            click.echo(line)
    else:
        for line in report.text_lines(explained, impact):
            click.echo(line)


def read_runs(
    results: tuple[Path, ...], at_from: Path | None, root: Path
) -> tuple[SuiteRun, SuiteRun | None, list[str]]:
    """The run at B (several files: one run), the run at A when given, and the ids of modules the tree lacks;
    a run holding no test of the tree is refused (exit 2), naming the fix."""
    run, strangers = _read_all(results, root)
    before = _read_all((at_from,), root)[0] if at_from is not None else None
    if not run.tests and not run.collect_errors:
        raise UsageError(
            f"no test of {', '.join(map(str, results))} is in the tree at {root} "
            f"({len(strangers)} ids of other modules, e.g. {strangers[0] if strangers else '-'}): pass --root TREE"
        )
    return run, before, strangers


def _read_all(paths: tuple[Path, ...], root: Path) -> tuple[SuiteRun, list[str]]:
    """Several result files (one per job, say) read as one run; the ids of modules the tree lacks."""
    run = SuiteRun()
    strangers: list[str] = []
    for path in paths:
        one, others = junit.read(path, root)
        run.tests.update(one.tests)
        run.collect_errors.update(one.collect_errors)
        run.seconds += one.seconds
        strangers += others
    return run, strangers

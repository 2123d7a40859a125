"""``migrate`` and ``census``: judge a hand-kept copy; find every copy of a vLLM function in a tree."""

from __future__ import annotations

from pathlib import Path

import click

from generator.atomic import require_regular_or_absent
from generator.cli import context
from generator.cli.context import source_options
from generator.cli.root import root_option
from generator.errors import UsageError, VerificationFailed
from generator.judge import census
from generator.judge.migrate import judge
from generator.judge.provenance import FIRST_RELEASE, Release
from generator.pins.pin import PIN_FILE, read_pin
from generator.sources.releases import released_tags
from generator.tags import validate_tag


@click.command()
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
@root_option
def migrate(file: Path, tag: str | None, since: str, source: str, vllm_repo: str | None) -> None:
    """Judge a hand-kept copy: its deltas, which release it is (or the closest), its extra edits.

    Exit 0 when it is the tag's schedule() plus the deltas and nothing else (the generated module
    can replace it), 1 otherwise.
    """
    tag = context.pinned_or(tag)
    since = validate_tag(since, origin="--since")
    if file is None:
        if not context.layout().is_tree:
            raise UsageError("migrate needs FILE (the hand-kept copy), or --root a vllm-ascend tree")
        file = context.root() / context.layout().balance().destination
    require_regular_or_absent(file, what="FILE")
    try:
        text = file.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {file} as UTF-8 text ({error}): pass the hand-kept module") from None
    sources = context.sources(source, vllm_repo)
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


@click.command(name="census")
@click.option(
    "--vllm-source",
    "source_path",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="vLLM source tree to index: its vllm/ package folder or a folder holding it "
    "(default: the release the tree pins, or --tag, read from its wheel on the package index, cached).",
)
@click.option(
    "--since",
    default=FIRST_RELEASE,
    show_default=True,
    metavar="TAG",
    help="Find each copy's closest release among the final releases from TAG on.",
)
@click.option("--tag", help="The vLLM release the tree runs with (default: the tree's pin file).")
@click.option(
    "--releases/--no-releases",
    default=True,
    show_default=True,
    help="Read each copy's upstream file at every release (package index, cached); without: the index only.",
)
@click.option(
    "--renamed",
    is_flag=True,
    help="Also compare functions no same-named upstream function matches with every upstream function (slower).",
)
@click.option("--edits", "show_edits", is_flag=True, help="Also list each copy's differing statements.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--refresh", is_flag=True, help="Ignore cached upstream files and read the releases again.")
@root_option
def census_cmd(
    source_path: Path | None,
    since: str,
    tag: str | None,
    releases: bool,
    renamed: bool,
    show_edits: bool,
    fmt: str,
    refresh: bool,
) -> None:
    """Every function in --root's tree that is a copy of a vLLM function, its closest release and staleness.

    A tree function is a copy of the same-named upstream function when at least 6 statements,
    and at least half of the longer one's, are the same in order (statements as `migrate`
    compares them: formatting and comments do not count).
    """
    root = context.root()
    if not root.is_dir():
        raise UsageError(f"--root {root} is not a folder: pass the tree to survey")

    since = validate_tag(since, origin="--since")
    if tag is not None:
        pin: str | None = validate_tag(tag, origin="--tag")
    elif (root / PIN_FILE).exists():
        pin = read_pin(root / PIN_FILE)
    else:
        pin = None
        context.progress(f"{root} has no {PIN_FILE}: staleness is not counted (pass --tag)")
    if source_path is None:
        if pin is None:
            raise UsageError(
                f"{root} has no {PIN_FILE}: pass --tag (the vLLM release the tree runs with) or --vllm-source DIR"
            )
        source = census.release_source(pin, context.progress, refresh=refresh)
    else:
        source = census.vllm_source(source_path)
        if pin is not None and source.version is not None and f"v{source.version}" != pin:
            context.progress(
                f"the index is vLLM {source.version} ({source.where}), the tree pins {pin}: functions "
                f"vLLM {source.version} lacks are not found; drop --vllm-source to index the pin's own files"
            )
    tags: list[str] = []
    read: census.ReleaseReader | None = None
    if releases:
        tags = released_tags(since)
        read = census.release_reader(context.progress, refresh=refresh)
    result = census.run(root, source, pin, tags, read, context.progress, renamed=renamed)
    if fmt == "json":
        click.echo(census.to_json_text(result), nl=False)
    else:
        for line in census.text_lines(result, show_edits):
            click.echo(line)

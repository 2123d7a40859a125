"""``specs``: the specs the tool ships for a layout, swept across releases, or written into a tree as its own."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from generator.atomic import require_regular_or_absent, write_all_or_nothing
from generator.cli import context
from generator.cli.context import source_options
from generator.cli.exits import exit_code_for
from generator.cli.root import root_option
from generator.errors import UsageError
from generator.sources.releases import released_tags
from generator.tags import tag_key, validate_tag
from generator.tree import specs as shipped_specs
from generator.tree.layout import BUILT_IN, SPEC_FILE, detect


@click.group(name="specs")
def specs() -> None:
    """The specs the tool ships (its built-in layouts): sweep them, or make them a tree's own."""


@specs.command()
@click.option("--force", is_flag=True, help=f"Overwrite the tree's {SPEC_FILE} with the built-in specs.")
@root_option
def export(force: bool) -> None:
    """Write the built-in specs into the tree's balance-patchgen.toml, which then wins over them: edit them there."""
    root = context.root()
    layout = detect(root)
    target = root / SPEC_FILE
    if layout.kind == "declared" and not force:
        raise UsageError(
            f"{target} exists and wins already: edit it, or pass --force to replace it with the built-in specs"
        )
    if layout.kind not in ("vllm-ascend", "declared"):
        raise UsageError(f"{root} is no vllm-ascend tree: the built-in specs are its layout's (pass its --root)")
    require_regular_or_absent(target, what=str(SPEC_FILE))
    name = Path(BUILT_IN).name
    write_all_or_nothing({target: shipped_specs.export(name).encode()})
    click.echo(
        f"wrote {target} from the built-in layouts/{name}: it wins over the built-in specs now; "
        "edit it, then `balance-patchgen --root . regen` (or `bump`) and commit it with the copies"
    )


@specs.command()
@click.argument("tags", nargs=-1, metavar="[TAG]...")
@source_options
@root_option
def sweep(tags: tuple[str, ...], source: str, vllm_repo: str | None) -> None:
    """Does each shipped spec apply at each release (default: from its since to the newest)? Exit 4 if one fails."""
    sources = context.sources(source, vllm_repo)
    asked = [validate_tag(t, origin="TAG") for t in tags]
    if not asked:
        floor = min((s.since for _, s in shipped_specs.shipped() if s.since), key=tag_key, default=None)
        if floor is None:
            raise UsageError("the shipped specs name no since: pass the release tags to sweep")
        asked = released_tags(floor)
    failed = []
    for tag in asked:
        for row in shipped_specs.sweeps(sources.fetch(tag)):
            click.echo(f"{tag:<12} {row.line}")
            if row.error is not None:
                failed.append(row.error)
    if failed:
        sys.exit(max(exit_code_for(e) for e in failed))

"""The documentation stays true where a test can read it against the code it describes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest

from balance_dev.project_files import REPO_ROOT
from generator.cli import app, exits

DOCS = sorted((REPO_ROOT / "docs").glob("*.md"))
PAGES = [REPO_ROOT / "README.md", *DOCS]
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _section(path: Path, heading: str) -> str:
    text = path.read_text()
    start = text.index(f"\n{heading}\n")
    end = text.find("\n#", start + len(heading) + 2)
    return text[start : end if end != -1 else None]


def _table_rows(text: str) -> list[list[str]]:
    """The cells of each Markdown table row, header and rule excluded (`\\|` stays inside a cell)."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows.append(cells)
    return rows[1:]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_exit_code_table_is_the_codes_table() -> None:
    documented = {int(row[0]) for row in _table_rows(_section(REPO_ROOT / "docs/cli.md", "## Exit codes"))}
    from_code = {code for _, code in exits.EXIT_CODES} | {0, exits.EXIT_BUG, exits.EXIT_INTERRUPTED}
    assert documented == from_code


def test_each_exit_code_row_names_the_failures_mapped_to_it() -> None:
    """The words for each typed error's code sit in that code's row (drift -> 1, delta -> 4, ...)."""
    rows = {int(r[0]): r[1] for r in _table_rows(_section(REPO_ROOT / "docs/cli.md", "## Exit codes"))}
    words = {"DriftFound": "drift", "VerificationFailed": "verification failed", "UsageError": "usage"}
    words |= {"WorkLeft": "work left for a person"}
    words |= {"SourceUnavailable": "upstream source unavailable", "DeltaDoesNotApply": "a delta no longer applies"}
    words |= {"UpstreamShapeError": "upstream lost the shape", "EditDoesNotApply": "a spec's edit no longer applies"}
    for error, code in exits.EXIT_CODES:
        assert words[error.__name__] in rows[code], (error.__name__, code)


def _documented_commands() -> dict[str, str]:
    """Each command's usage cell by its name (a group's commands as ``group sub``)."""
    rows = _table_rows((REPO_ROOT / "docs/cli.md").read_text().split("## ", 1)[0])
    out = {}
    for row in rows:
        words = re.match(r"`(\w+)(?: (\w+))?", row[0])
        assert words is not None, row[0]
        name = f"{words[1]} {words[2]}" if words[1] in _GROUPS and words[2] else words[1]
        out[name] = row[0]
    return out


def _command(name: str) -> click.Command:
    """A command by its name (``specs export``: a group's command)."""
    first, _, sub = name.partition(" ")
    with click.Context(app.main) as ctx:
        command = app.main.get_command(ctx, first)
        if sub:
            assert isinstance(command, click.Group), name
            command = command.get_command(ctx, sub)
    assert command is not None, name
    return command


def _names() -> list[str]:
    """Every command, a group's as ``group sub``."""
    out = []
    for name in app.COMMANDS:
        command = _command(name)
        subs = sorted(command.commands) if isinstance(command, click.Group) else []
        out += [f"{name} {sub}" for sub in subs] or [name]
    return out


_GROUPS = {name for name in app.COMMANDS if isinstance(_command(name), click.Group)}


def test_every_command_is_documented_and_every_documented_command_exists() -> None:
    assert set(_documented_commands()) == set(_names())


def _options(name: str) -> set[str]:
    return {o for p in _command(name).params if isinstance(p, click.Option) for o in p.opts} - {"--help"}


def test_root_is_documented_as_taken_before_and_after_any_command() -> None:
    text = (REPO_ROOT / "docs/cli.md").read_text()
    assert "`--root DIR` is taken before the command name or after it" in text
    assert all("--root" in _options(name) for name in _names())


@pytest.mark.parametrize("name", sorted(_names()))
def test_every_documented_option_exists_and_every_option_is_documented(name: str) -> None:
    usage = _documented_commands()[name]
    documented = set(re.findall(r"--[a-z][a-z-]*", usage))
    negations = {o for p in _command(name).params if isinstance(p, click.Option) for o in p.secondary_opts}
    assert documented <= _options(name) | negations, documented - _options(name) - negations
    if "[source options]" in usage:
        documented |= {"--source", "--vllm-repo", "--refresh"}
    if "[same options]" in usage:
        documented |= _options("regen")
    documented |= {"--root"}  # every command's, documented once (the test above)
    assert _options(name) <= documented, _options(name) - documented


def test_the_plan_fields_documented_are_the_schemas() -> None:
    schema = json.loads((REPO_ROOT / "generator/pins/plan.schema.json").read_text())
    rows = _table_rows(_section(REPO_ROOT / "docs/pin-bump.md", "## The plan"))
    assert [row[0].strip("`") for row in rows] == schema["required"]
    assert set(schema["properties"]) == set(schema["required"])


def test_the_documented_action_pins_are_the_workflows() -> None:
    rows = _table_rows(_section(REPO_ROOT / "docs/installing.md", "## GitHub Actions: the workflows"))
    documented = {f"{r[0].strip('`')}@{r[2].strip('`')} # {r[1]}" for r in rows if r[0].startswith("`actions/")}
    used = set()
    for workflow in (REPO_ROOT / ".github/workflows").glob("*.yml"):
        used |= set(re.findall(r"uses: (\S+@[0-9a-f]{40} # v[\d.]+)", workflow.read_text()))
    assert documented == used


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    text = page.read_text()
    assert _LINK.findall(text) or page.name != "README.md"
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # an absolute URL: not this repository's to keep
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: {target}"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", resolved.read_text(), re.MULTILINE)
            assert anchor in {_slug(h) for h in headings}, f"{page.name}: {target}"


def test_the_readme_lists_every_page_in_docs() -> None:
    linked = set(_LINK.findall((REPO_ROOT / "README.md").read_text()))
    assert {f"docs/{p.name}" for p in DOCS} <= linked

"""``--root DIR``: one option, taken before the command name and after it alike (click keeps it in the context)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from generator.errors import UsageError

_ROOT = "balance_patchgen.root"

F = TypeVar("F", bound=Callable[..., Any])


def _remember_root(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    if value is None:
        return
    meta = ctx.find_root().meta
    given = meta.get(_ROOT)
    if given is not None and given != value:
        raise UsageError(f"--root is given twice, as {given} and as {value}: pass it once")
    meta[_ROOT] = value


def root_option(func: F) -> F:
    """``--root DIR``: one definition, taken before the command name and after it alike."""
    return click.option(
        "--root",
        type=click.Path(file_okay=False, path_type=Path),
        expose_value=False,
        callback=_remember_root,
        help="Repository root holding .github/ and generated/, or a plugin's tree (default: the current folder).",
    )(func)


def root() -> Path:
    found: Path = click.get_current_context().find_root().meta.get(_ROOT, Path("."))
    return found

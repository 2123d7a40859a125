"""What every command shares: the root (``--root``, before or after the command), its layout, the sources.

Read through click's context, so a command needs no extra parameter for them and reads each once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from generator.atomic import is_same_file, require_regular_or_absent
from generator.cli.root import root
from generator.errors import DriftFound, FileRefused, UsageError
from generator.judge import check as drift
from generator.pins.pin import PIN_FILE, read_pin
from generator.pins.refs import MAIN_VERIFIED_FILE, read_main_verified
from generator.sources.base import UpstreamFile
from generator.sources.resolve import SourceKind, fetch_ref, fetch_upstream
from generator.tags import validate_tag
from generator.tree.layout import Layout, detect, require_tree

DEFAULT_OUTPUT = Path("generated/balance_scheduler.py")
# The module for the vLLM main commit vllm-ascend's CI runs (.github/vllm-main-verified.commit); the runtime
# imports whichever generated module matches the installed scheduler.py.
MAIN_VERIFIED_OUTPUT = Path("generated/balance_scheduler_main_verified.py")

_LAYOUT = "balance_patchgen.layout"
_REFRESH = "balance_patchgen.refresh"

F = TypeVar("F", bound=Callable[..., Any])


def layout() -> Layout:
    """What the root holds (layout.detect), read once per command."""
    meta = click.get_current_context().find_root().meta
    if _LAYOUT not in meta:
        detected = detect(root())
        if not detected.is_tree and not (root() / PIN_FILE).exists() and not (root() / DEFAULT_OUTPUT).parent.is_dir():
            require_tree(detected)  # a --root holding nothing the tool knows: say so, not "no pin file"
        meta[_LAYOUT] = detected
    found: Layout = meta[_LAYOUT]
    return found


def pin_path() -> Path:
    return root() / layout().pin


def pinned_or(tag: str | None) -> str:
    return validate_tag(tag, origin="--tag") if tag is not None else read_pin(pin_path())


def main_verified_ref() -> str:
    return read_main_verified(root() / layout().main_verified)


def progress(message: str) -> None:
    click.echo(f"balance-patchgen: {message}", err=True)


def echo_diff(diff: str) -> None:
    colours = {"+": "green", "-": "red", "@": "cyan"}
    for line in diff.splitlines():
        # click.echo drops the colour codes when stdout is not a terminal.
        colour = None if line.startswith(("+++", "---")) else colours.get(line[:1])
        click.echo(click.style(line, fg=colour) if colour else line)


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
            progress=progress,
            recorded_sha256=_recorded_sha256(self.module, tag),
            refresh=self.refresh,
        )

    def fetch_ref(self, ref: str) -> UpstreamFile:
        return fetch_ref(ref, self.kind, self.vllm_repo, progress=progress)


def _recorded_sha256(module: Path | None, tag: str) -> str | None:
    """The upstream sha256 the module's header records, if the header is for ``tag``."""
    if module is None or not module.is_file():
        return None
    with module.open("rb") as handle:
        head = handle.read(16 * 1024).decode("utf-8", errors="replace")
    header = drift.header_fields(head)
    return header.get("sha256") if header.get("tag") == tag else None


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
    ctx.meta[_REFRESH] = value
    return value


def sources(source: str, vllm_repo: str | None, module: Path | None = None) -> SourceOptions:
    refresh = bool(click.get_current_context().meta.get(_REFRESH, False))
    return SourceOptions(SourceKind(source), vllm_repo, refresh=refresh, module=module)


def no_output_in_tree(output: Path | None) -> None:
    if output is not None:
        raise UsageError(
            f"--output is for this project's generated module; {layout().origin} says where each copy goes: "
            "drop --output"
        )


def output_path(output: Path | None) -> Path:
    path = root() / (output or DEFAULT_OUTPUT)
    if not path.parent.is_dir():
        if output is None and root() != Path("."):
            require_tree(layout())  # a --root that is neither a tree nor this project's layout
        raise UsageError(f"output folder {path.parent} does not exist: create it or pass --output")
    if is_same_file(path, root() / PIN_FILE):
        raise FileRefused(f"--output {path} is the pin file: pass the module's path (default {DEFAULT_OUTPUT})")
    require_regular_or_absent(path, what="--output")
    return path


def stale(shown: str, reason: str) -> DriftFound:
    return DriftFound(f"{shown} is stale: {reason}; run `make regen` to remove it")


def main_verified_option(func: F) -> F:
    return click.option(
        "--main-verified",
        is_flag=True,
        help=f"The vLLM commit in {MAIN_VERIFIED_FILE} instead of the pin (a git source): "
        f"this project's {MAIN_VERIFIED_OUTPUT}; in a tree, check compares the copies' upstream with it.",
    )(func)

"""Every copy a tree declares, regenerated together: what ``--root TREE regen/check/bump`` compute.

Reads the destination files (nothing is written here: the CLI writes all of them, or none), builds
each copy for the tag (``tree.build``; several copies in one file are built one after another on
its text), and says what a maintainer should read: changes outside the copies, and the extra edits
a hand-kept balance copy carried that the regenerated one drops (``migrate`` finds them).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from generator.errors import TreeRefused
from generator.judge import migrate, provenance
from generator.sources.base import UpstreamFile
from generator.tree import place as tree
from generator.tree import region
from generator.tree.layout import CopySpec, Layout

Fetch = Callable[[str], UpstreamFile]


@dataclass(frozen=True)
class FileResult:
    path: Path  # relative to the root
    old: str
    new: str
    copies: tuple[tree.Built, ...]

    @property
    def changed(self) -> bool:
        return self.old != self.new


def read(layout: Layout, path: Path) -> str:
    full = layout.root / path
    if not full.is_file():
        raise TreeRefused(
            f"{path} (named by {layout.origin}) is not in {layout.root}: fix the destination, or pass the right --root"
        )
    try:
        return full.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TreeRefused(f"{path} is not UTF-8 text (byte {exc.start}): fix the file") from None


def present(layout: Layout, spec: CopySpec) -> bool:
    """Whether the tree holds the copy; an optional copy it lacks is skipped, any other must be there."""
    if not spec.optional:
        return True
    path = layout.root / spec.destination
    return path.is_file() and f"class {spec.dest_class}" in path.read_text(encoding="utf-8", errors="replace")


def regenerate(layout: Layout, upstream: UpstreamFile, copies: Sequence[CopySpec] | None = None) -> list[FileResult]:
    """Each destination file with its copies regenerated from ``upstream`` (in the layout's order)."""
    chosen = [c for c in (layout.copies if copies is None else copies) if present(layout, c)]
    files: dict[Path, list[CopySpec]] = {}
    for spec in chosen:
        files.setdefault(spec.destination, []).append(spec)
    results = []
    for path, specs in files.items():
        old = text = read(layout, path)
        built = []
        for spec in specs:
            one = tree.build(spec, upstream, text, str(path))
            built.append(one)
            text = one.new
        results.append(FileResult(path, old, text, tuple(built)))
    return results


def dropped_edits(result: FileResult, upstream: UpstreamFile, releases: Callable[[], list]) -> list[str]:
    """The extra edits the old balance copy carried (against the release it is closest to): they go now."""
    lines = []
    for built in result.copies:
        if not built.changed or built.kept:
            continue
        if built.where.marked:
            continue  # a generated copy carries no extra edits (a hand edit in it is `check`'s to report)
        if not built.spec.is_balance:
            lines += _replaced(built)
            continue
        report = migrate.judge(result.old, upstream.tag, upstream.text, releases)
        if report.replaceable:
            continue
        lines.append(f"{built.spec.label} was {report.verdict}; the regenerated copy drops its extra edits:")
        lines += [f"  {edit.describe()}" for edit in report.extra_edits]
        if not report.extra_edits:
            lines.append("  (none besides the release's own changes)")
    return lines


@dataclass(frozen=True)
class Drift:
    path: Path
    label: str
    cause: str
    diff: str


def drifts(results: Sequence[FileResult], tag: str) -> list[Drift]:
    """What ``check`` reports: each copy whose file differs from its regeneration, and why."""
    found = []
    for result in results:
        if not result.changed:
            continue
        for built in result.copies:
            if not built.changed:
                continue
            where = built.where
            if not where.marked:
                cause = (
                    f"{built.spec.label} in {result.path} is not generated yet: run `balance-patchgen --root . regen`"
                )
            elif where.tag != tag:
                cause = (
                    f"{built.spec.label} in {result.path} is from vLLM {where.tag}, the pin says {tag}: "
                    "run `balance-patchgen --root . regen`"
                )
            elif built.outside and _only_outside(built):
                cause = (
                    f"{result.path} needs the change outside {built.spec.label} that vLLM {tag}'s copy needs "
                    "(shown above): run `balance-patchgen --root . regen`"
                )
            else:
                cause = (
                    f"{built.spec.label} in {result.path} was edited by hand: move the edit into the copy's spec "
                    "(docs/copies.md), then run `balance-patchgen --root . regen`"
                )
            diff = "".join(
                difflib.unified_diff(
                    built.old.splitlines(True),
                    built.new.splitlines(True),
                    f"{result.path} (committed)",
                    f"{result.path} (regenerated)",
                    n=3,
                )
            )
            found.append(Drift(result.path, built.spec.label, cause, diff))
    return found


def _only_outside(built: tree.Built) -> bool:
    """The region itself regenerates byte for byte: only the outside change differs."""
    old = built.where
    return built.old.splitlines()[old.start : old.end] == built.rendered.splitlines()


def _replaced(built: tree.Built) -> list[str]:
    """What the hand copy had that the regenerated one does not (upstream's changes since, and dropped edits)."""
    old = provenance.reduce(built.where.method)
    new = provenance.reduce(region.rendered_method(built.rendered))
    runs = provenance.edits(old, new)
    if not runs:
        return [f"{built.spec.label}: the hand copy it replaces had the same statements"]
    head = f"{built.spec.label}: the hand copy it replaces differs in {len(runs)} runs of statements (read them):"
    return [head, *(f"  {run.describe('the regenerated copy')}" for run in runs)]

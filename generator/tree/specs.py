"""The specs the tool ships (``tree/layouts/``): swept across releases, and written into a tree to become its own.

A sweep applies each shipped copy's data edits to upstream's function at a release, as a bump there
would: it *applies*, *stops* (an edit says it is written up to an earlier release: a maintainer's
decision, with why), or *fails* (an anchor upstream changed: the spec needs re-anchoring). The
balance copy's Python deltas are ``matrix``'s to sweep. ``export`` is a built-in layout's text for a
tree's ``balance-patchgen.toml``, which then wins over the built-in one.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from generator.builder import edits, extract
from generator.errors import EditDoesNotApply, UpstreamShapeError
from generator.sources.base import UpstreamFile
from generator.tags import is_release_tag, tag_key
from generator.tree.layout import BUILT_IN, CopySpec, load_text

APPLIES, STOPS, FAILS = "applies", "stops", "fails"


@dataclass(frozen=True)
class Sweep:
    layout: str  # the built-in layout's file name
    spec: str
    tag: str
    outcome: str  # applies | stops | fails
    line: str  # what a maintainer reads
    error: EditDoesNotApply | UpstreamShapeError | None = None


def built_in() -> dict[str, str]:
    """Every built-in layout's text, by its file name (``vllm-ascend.toml``)."""
    folder = resources.files("generator.tree").joinpath("layouts")
    return {
        f.name: f.read_text(encoding="utf-8") for f in sorted(folder.iterdir(), key=str) if f.name.endswith(".toml")
    }


def shipped() -> list[tuple[str, CopySpec]]:
    """Each built-in copy with data edits (what a sweep applies), with its layout's file name."""
    out = []
    for name, text in built_in().items():
        layout = load_text(text, Path("."), Path(name).stem, f"layouts/{name}")
        out += [(name, spec) for spec in layout.copies if spec.edits]
    return out


def due(spec: CopySpec, tag: str) -> bool:
    """Whether a tree pinned to ``tag`` regenerates the copy from the spec (its ``since`` reached; a ref is)."""
    return spec.since is None or not is_release_tag(tag) or tag_key(tag) >= tag_key(spec.since)


def sweep(layout: str, spec: CopySpec, upstream: UpstreamFile) -> Sweep:
    """The spec's data edits at ``upstream``'s release or ref."""
    tag = upstream.tag
    for edit in spec.edits:
        if not edit.written_for(tag):
            line = f"spec {spec.name}: stops at edit {edit.name!r} (written up to {edit.until}): {edit.why}"
            return Sweep(layout, spec.name, tag, STOPS, line)
    try:
        module = extract.parse(upstream.text, tag)
        method = extract.extract(module, tag, spec.upstream_class, spec.upstream_method).method
        _, done = edits.apply(module, method, spec, tag=tag, upstream_text=upstream.text)
    except (EditDoesNotApply, UpstreamShapeError) as error:
        return Sweep(layout, spec.name, tag, FAILS, f"spec {spec.name}: FAIL ({type(error).__name__}): {error}", error)
    return Sweep(layout, spec.name, tag, APPLIES, f"spec {spec.name}: applies ({len(done)} edits)")


def sweeps(upstream: UpstreamFile) -> list[Sweep]:
    """Every shipped spec due at ``upstream``'s release, swept there."""
    return [sweep(layout, spec, upstream) for layout, spec in shipped() if due(spec, upstream.tag)]


def export(name: str = Path(BUILT_IN).name) -> str:
    """The built-in layout ``name`` as a tree's own ``balance-patchgen.toml``."""
    head = (
        f"# Written by `balance-patchgen specs export` from the tool's built-in layouts/{name}. This file is the\n"
        "# tree's own now and wins over the built-in specs: re-anchor an edit here when a bump refuses\n"
        "# (docs/adopting.md, 'When a bump refuses'; the format: docs/copies.md).\n\n"
    )
    return head + built_in()[name]

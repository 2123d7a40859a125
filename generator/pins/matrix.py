"""One ``matrix`` line per tag or ref: do the deltas apply and verify there, or which one fails."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from generator.builder import pipeline, seam, verify
from generator.errors import (
    DeltaDoesNotApply,
    EditDoesNotApply,
    PatchgenError,
    SourceUnavailable,
    UpstreamShapeError,
    VerificationFailed,
)
from generator.sources.base import UpstreamFile

# What one tag can fail with while the others are still worth checking; anything else stops the run.
ROW_ERRORS = (SourceUnavailable, DeltaDoesNotApply, UpstreamShapeError, VerificationFailed, EditDoesNotApply)
# Upstream moved away from an anchor (exit 4): a maintainer's decision, which a plan describes
# (an issue to open) instead of failing. Any other failure fails the planning command itself.
PLANNED_ERRORS = (DeltaDoesNotApply, UpstreamShapeError, EditDoesNotApply)

# What a sweep of other copies says about one upstream file: (the line, the failure or None).
Also = Callable[[UpstreamFile], Sequence[tuple[str, PatchgenError | None]]]


@dataclass(frozen=True)
class Row:
    label: str  # the tag; for a ref, ``branch@commit12`` or ``commit12`` once it was read
    status: str  # "ok: ..." or "FAIL (ErrorType): ..."
    error: PatchgenError | None = None

    @property
    def line(self) -> str:
        return f"{self.label:<12} {self.status}"


def status(upstream: UpstreamFile) -> str:
    """What a maintainer needs to know about one upstream file; raises what a bump there would."""
    if (reason := seam.no_copy_reason(upstream)) is not None:
        return f"ok: {reason}"
    verified = verify.verify(pipeline.generate(upstream), upstream.text)
    return f"ok: {verified.summary}; the leader is asked {verified.question}"


def row(label: str, fetch: Callable[[], UpstreamFile]) -> Row:
    """The line for ``label``; once read, a ref is shown with the commit it was read at."""
    return rows(label, fetch)[0]


def rows(label: str, fetch: Callable[[], UpstreamFile], also: Also | None = None) -> list[Row]:
    """``row``, then a line for each of ``also`` (the shipped specs' sweep) on the same upstream file."""
    try:
        upstream = fetch()
    except ROW_ERRORS as error:
        return [Row(label, f"FAIL ({type(error).__name__}): {error}", error)]
    label = upstream.tag
    try:
        first = Row(label, status(upstream))
    except ROW_ERRORS as error:
        first = Row(label, f"FAIL ({type(error).__name__}): {error}", error)
    return [first, *(Row(label, line, error) for line, error in (also(upstream) if also else ()))]

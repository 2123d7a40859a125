"""Every failure the generator can report, as a typed exception.

The CLI maps these classes to exit codes (and nothing else does): code that raises does not
need to know how the process ends, and tests can assert on the type.
"""

from __future__ import annotations


class PatchgenError(Exception):
    """Base: ``str(err)`` is the one line shown to the user; it names the problem and the fix."""

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        # Extra lines (upstream context, a diff) printed after the one-line message.
        self.detail = detail


class UsageError(PatchgenError):
    """Bad input from the user: a malformed pin file, an invalid tag string, a missing file."""


class SourceUnavailable(PatchgenError):
    """Upstream cannot be read: tag not found, offline, hash mismatch, wrong installed version."""


class DeltaDoesNotApply(PatchgenError):
    """A delta's anchor matched zero times or more than once in upstream ``schedule()``."""

    def __init__(self, message: str, *, delta: int, detail: str = "") -> None:
        super().__init__(message, detail=detail)
        self.delta = delta  # which delta (1-3), for a plan's issue


class UpstreamShapeError(PatchgenError):
    """Upstream no longer has the structure the generator relies on (class, method, import)."""


class DriftFound(PatchgenError):
    """The committed generated module differs from a fresh regeneration."""


class VerificationFailed(PatchgenError):
    """The independent inverse check disagrees with upstream."""


class WorkLeft(PatchgenError):
    """``adapt`` (or ``bump --adapt``) wrote what it could, and left work a person must do (listed above)."""


class FileRefused(UsageError):
    """A path the user named cannot be used as asked: not a regular file, the pin file, unreadable."""


class FetchTimedOut(SourceUnavailable):
    """A fetch from the package index did not finish within its total deadline."""


class CacheMismatch(SourceUnavailable):
    """A cached or installed upstream file differs from the one the committed module was generated from."""


class EditDoesNotApply(PatchgenError):
    """A spec's edit found its anchor zero times or more than once in upstream's function."""

    def __init__(self, message: str, *, spec: str, edit: str, detail: str = "") -> None:
        super().__init__(message, detail=detail)
        self.spec, self.edit = spec, edit


class TreeRefused(UsageError):
    """A consumer's tree cannot be worked on as asked: no pin, no copy where the spec says, an unknown form."""


class SiteChanged(UsageError):
    """A file ``adapt`` read changed on disk before it could write: nothing is written."""

"""Exit codes: the one place a typed error becomes a number (docs/cli.md, "Exit codes")."""

from __future__ import annotations

import errno
import sys
from typing import NoReturn

import click

from generator.errors import (
    DeltaDoesNotApply,
    DriftFound,
    EditDoesNotApply,
    PatchgenError,
    SourceUnavailable,
    UpstreamShapeError,
    UsageError,
    VerificationFailed,
    WorkLeft,
)

# Checked in order, most specific first.
EXIT_CODES: tuple[tuple[type[PatchgenError], int], ...] = (
    (DriftFound, 1),
    (VerificationFailed, 1),
    # Like drift: the tree is not yet what it should be and a person must act; unlike every other code,
    # what could be written was written (adapt's leftovers: docs/adapt.md, "Exit codes").
    (WorkLeft, 1),
    (UsageError, 2),
    (SourceUnavailable, 3),
    (DeltaDoesNotApply, 4),
    (EditDoesNotApply, 4),
    (UpstreamShapeError, 4),
)

# Failures that are no typed error: 5 is never a user's fault, 130 is the shell's convention for
# SIGINT, so scripts can tell "interrupted" from "drift".
EXIT_BUG = 5
EXIT_INTERRUPTED = 130


def exit_code_for(error: PatchgenError) -> int:
    return next(code for cls, code in EXIT_CODES if isinstance(error, cls))


def fail(error: PatchgenError) -> NoReturn:
    click.echo(f"balance-patchgen: error: {error}", err=True)
    if error.detail:
        click.echo(error.detail, err=True)
    sys.exit(exit_code_for(error))


def fail_line(message: str, code: int) -> NoReturn:
    click.echo(f"balance-patchgen: error: {message}", err=True)
    sys.exit(code)


def os_error(error: OSError) -> UsageError:
    """One line for a read or write the operating system refused, naming the file and the fix."""
    where = f" {error.filename}" if error.filename else ""
    reason = error.strerror or str(error)
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return UsageError(f"no space left to write{where} ({reason}): free space on that disk, then run again")
    if error.errno == errno.EFBIG:
        return UsageError(f"cannot write{where} ({reason}): raise the file size limit (ulimit -f), then run again")
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return UsageError(f"cannot access{where} ({reason}): check the path and its permissions")
    return UsageError(f"cannot access{where} ({reason}): check the path, the disk and its permissions")

"""The pinned vLLM release tag: the single source of truth for which upstream we copy."""

from __future__ import annotations

import re
import stat
from pathlib import Path

from generator.errors import FileRefused, UsageError
from generator.tags import TAG_RE, validate_tag

PIN_FILE = Path(".github/vllm-release-tag.commit")

# Text worth echoing back from a pin file: something a person may have meant as a tag. Anything
# else (a symlink to a secret, shell text) is not repeated in the error, only the path is.
# Version-like text, or a short plain word such as a branch name ("main").
_PLAUSIBLE_RE = re.compile(r"[vV]?\d[0-9A-Za-z.+-]{0,30}|[A-Za-z]{1,12}")

# A tag is ~10 bytes; reading more would only help a pin pointing at /dev/zero or a huge file.
_PIN_MAX_BYTES = 256


def read_commit_file(path: Path, *, what: str, example: str) -> str:
    """A one-word ``.commit`` file read exactly as CI does (``tr -d '[:space:]'``), not yet validated.

    ``what`` names the file in messages ("pin file"), ``example`` is what it should hold.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise UsageError(f"{what} {path} does not exist: create it with {example}") from None
    except OSError as exc:
        raise FileRefused(f"cannot read {what} {path} ({exc.strerror}): check the path and its permissions") from None
    if not stat.S_ISREG(mode):
        # A FIFO would block the read forever and a device could stream without end.
        raise FileRefused(f"{what} {path} is not a regular file: make it a plain file holding {example}")
    with path.open("rb") as handle:
        raw = handle.read(_PIN_MAX_BYTES + 1)
    if len(raw) > _PIN_MAX_BYTES:
        raise UsageError(f"{what} {path} is far longer than it should be: write only {example} into it")
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise UsageError(f"{what} {path} is not ASCII text: write {example}") from None
    return re.sub(r"[ \t\n\r\v\f]", "", text)


def read_pin(path: Path) -> str:
    """Read the pin exactly as CI does (``tr -d '[:space:]'``) and validate it."""
    tag = read_commit_file(path, what="pin file", example="a tag such as v0.24.0")
    # Through a symlink the content is some other file's, never something written as a pin: not echoed.
    if tag and not TAG_RE.fullmatch(tag) and (path.is_symlink() or not _PLAUSIBLE_RE.fullmatch(tag)):
        raise UsageError(
            f"pin file {path} does not hold a plain vLLM release tag (its content is not shown: it is not "
            "tag-like, e.g. shell text or a symlink's target): write a tag such as v0.24.0 into it"
        )
    return validate_tag(tag, origin=f"pin file {path}")

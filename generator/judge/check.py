"""The drift gate: compare the committed module with a fresh regeneration and explain the cause.

The comparison is of bytes: Python, libcst and ``ast`` all read CRLF or CR as line breaks, so a
module whose line endings were converted still parses and verifies, but it is not what the
generator writes, and the next regen would rewrite every line.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from generator.errors import VerificationFailed

_HEADER_RE = {
    "tag": re.compile(r"^# upstream tag:\s+(\S+)$", re.M),
    "sha256": re.compile(r"^# upstream sha256:\s+([0-9a-f]{64})$", re.M),
}


@dataclass(frozen=True)
class Drift:
    diff: str
    cause: str
    first_line: int  # first differing line of the committed file (1-based), for annotations


_ENDINGS_FIX = "run `make regen`, and keep git and editors from converting it (.gitattributes: `generated/** -text`)"


def header_fields(text: str) -> dict[str, str]:
    head = "\n".join(text.splitlines()[:40])
    return {key: m.group(1) for key, rx in _HEADER_RE.items() if (m := rx.search(head))}


def _lf_only(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _first_cr_line(data: bytes) -> int:
    return data[: data.index(b"\r")].count(b"\n") + 1


def module_text(data: bytes, *, path: str, tag: str, upstream: bytes, upstream_sha256: str) -> str:
    """The text of a module about to be verified, refusing what a text comparison cannot see.

    ``verify`` compares parsed code and text lines; both are blind to converted line endings and
    an undecodable file is no module at all. A header naming this tag with another sha256 was
    generated from other upstream bytes than the ones it is being verified against.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise VerificationFailed(f"{path} is not UTF-8 text (line {line}): run `make regen`") from None
    if b"\r" in data and b"\r" not in upstream:
        raise VerificationFailed(
            f"{path}: line endings changed (CRLF or CR from line {_first_cr_line(data)}; upstream uses LF): "
            + _ENDINGS_FIX
        )
    header = header_fields(text)
    if header.get("tag") == tag and header.get("sha256", upstream_sha256) != upstream_sha256:
        raise VerificationFailed(
            f"{path} was generated from upstream {tag} with sha256 {header['sha256'][:12]}, but {tag} here has "
            f"{upstream_sha256[:12]}: one of them was altered; fetch upstream again (--source release) "
            "and run `make regen` only if the release itself is what changed"
        )
    return text


def unified_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), fromfile=old_name, tofile=new_name))


def compare(committed_bytes: bytes | None, fresh: str, *, path: str, tag: str, upstream_sha256: str) -> Drift | None:
    if committed_bytes == fresh.encode("utf-8"):
        return None
    if committed_bytes is None:
        return Drift(diff="", cause=f"{path} does not exist; run `make regen`", first_line=1)
    try:
        as_read = committed_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = committed_bytes[: exc.start].count(b"\n") + 1
        return Drift(diff="", cause=f"{path} is not UTF-8 text (line {line}): run `make regen`", first_line=line)
    committed = _lf_only(as_read)
    endings_changed = committed != as_read and "\r" not in fresh
    if endings_changed and committed == fresh:
        cause = f"line endings changed in {path} (CRLF or CR instead of LF): {_ENDINGS_FIX}"
        return Drift(diff="", cause=cause, first_line=_first_cr_line(committed_bytes))
    header = header_fields(committed)
    if header.get("tag") != tag:
        generated_from = header.get("tag", "an unknown tag")
        cause = f"the pin says {tag} but {path} was generated from {generated_from}: "
        if "tag" in header:
            # Exactly what an interrupted `bump` leaves (it writes the module first, the pin last).
            cause += (
                f"if a `bump {generated_from}` was interrupted, finish it: `balance-patchgen bump {generated_from}`; "
                f"otherwise run `make regen` to regenerate for {tag}, and commit the result"
            )
        else:
            cause += "run `make regen` and commit the result"
    elif header.get("sha256") != upstream_sha256:
        cause = (
            f"upstream content for {tag} changed (sha256 {header.get('sha256', '?')[:12]} -> "
            f"{upstream_sha256[:12]}): find out why the tag moved, then run `make regen`"
        )
    else:
        cause = (
            f"{path} was edited by hand (or the generator changed without a regen): "
            "run `make regen` and commit the result; put hand-written logic in vllm_ascend/"
        )
    if endings_changed:
        cause += f" (also: line endings changed; {_ENDINGS_FIX})"
    first = next(
        (i + 1 for i, (a, b) in enumerate(zip(committed.splitlines(), fresh.splitlines(), strict=False)) if a != b),
        min(len(committed.splitlines()), len(fresh.splitlines())) + 1,
    )
    diff = unified_diff(committed, fresh, f"{path} (committed)", f"{path} (regenerated)")
    return Drift(diff=diff, cause=cause, first_line=first)

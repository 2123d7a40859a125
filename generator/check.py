"""The drift gate: compare the committed module with a fresh regeneration and explain the cause."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_HEADER_RE = {
    "tag": re.compile(r"^# upstream tag:\s+(\S+)$", re.M),
    "sha256": re.compile(r"^# upstream sha256:\s+([0-9a-f]{64})$", re.M),
}


@dataclass(frozen=True)
class Drift:
    diff: str
    cause: str
    first_line: int  # first differing line of the committed file (1-based), for annotations


def header_fields(text: str) -> dict[str, str]:
    head = "\n".join(text.splitlines()[:40])
    return {key: m.group(1) for key, rx in _HEADER_RE.items() if (m := rx.search(head))}


def unified_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), fromfile=old_name, tofile=new_name))


def compare(committed: str | None, fresh: str, *, path: str, tag: str, upstream_sha256: str) -> Drift | None:
    if committed == fresh:
        return None
    if committed is None:
        return Drift(diff="", cause=f"{path} does not exist; run `make regen`", first_line=1)
    header = header_fields(committed)
    if header.get("tag") != tag:
        cause = (
            f"the pin says {tag} but {path} was generated from {header.get('tag', 'an unknown tag')}: "
            "run `make regen` and commit the result"
        )
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
    first = next(
        (i + 1 for i, (a, b) in enumerate(zip(committed.splitlines(), fresh.splitlines(), strict=False)) if a != b),
        min(len(committed.splitlines()), len(fresh.splitlines())) + 1,
    )
    diff = unified_diff(committed, fresh, f"{path} (committed)", f"{path} (regenerated)")
    return Drift(diff=diff, cause=cause, first_line=first)

"""The installed ``vllm`` distribution, trusted only when it is the pinned version and unedited."""

from __future__ import annotations

import csv
from importlib import metadata
from pathlib import Path

from generator.errors import SourceUnavailable
from generator.sources.base import UPSTREAM_PATH, UpstreamFile, record_digest
from generator.tags import version_of


def installed_version() -> str | None:
    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None


def matches(tag: str) -> bool:
    return installed_version() == version_of(tag)


def fetch(tag: str) -> UpstreamFile:
    wanted = version_of(tag)
    try:
        dist = metadata.distribution("vllm")
    except metadata.PackageNotFoundError:
        raise SourceUnavailable(
            f"vLLM is not installed, so --source installed cannot read {tag}: "
            f"install vllm=={wanted} or use --source release"
        ) from None
    if dist.version != wanted:
        raise SourceUnavailable(
            f"installed vLLM is {dist.version}, not {wanted} as {tag} needs: "
            f"install vllm=={wanted} or use --source release"
        )
    digest = _recorded_digest(dist.read_text("RECORD") or "")
    if digest is None:
        raise SourceUnavailable(
            f"installed vLLM {wanted} has no sha256 for {UPSTREAM_PATH} in its RECORD: "
            "reinstall it from the package index or use --source release"
        )
    location = Path(str(dist.locate_file(UPSTREAM_PATH)))
    try:
        data = location.read_bytes()
    except OSError as exc:
        # The distribution says it has the file: a broken install is an unavailable source (3), not bad input.
        raise SourceUnavailable(
            f"installed vLLM {wanted} lists {UPSTREAM_PATH} in its RECORD but {location} cannot be read "
            f"({exc.strerror}): reinstall vllm=={wanted} or use --source release"
        ) from None
    if record_digest(data) != digest:
        # A locally edited site-packages must never become "upstream".
        raise SourceUnavailable(
            f"installed {UPSTREAM_PATH} does not match its RECORD hash (edited locally?): "
            f"reinstall vllm=={wanted} or use --source release"
        )
    return UpstreamFile(tag=tag, data=data, origin="installed")


def _recorded_digest(record: str) -> str | None:
    """RECORD's ``sha256=...`` for the upstream file, or None.

    Only that one row is parsed: ``Distribution.files`` builds a path object for each of vLLM's
    ~6,500 rows, which cost more than the rest of a warm ``check`` outside libcst.
    """
    for line in record.splitlines():
        if UPSTREAM_PATH not in line:
            continue
        row = next(csv.reader([line]), [])
        if len(row) >= 2 and row[0] == UPSTREAM_PATH and row[1].startswith("sha256="):
            return row[1]
    return None

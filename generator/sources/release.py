"""The released vLLM artifact of the pinned version, read member-wise from the package index."""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Collection

from generator.errors import SourceUnavailable
from generator.sources import index
from generator.sources.base import UPSTREAM_PATH, Progress, UpstreamFile, matches_record, no_progress
from generator.tags import version_of


def choose_wheel(files: list[index.IndexFile], version: str) -> index.IndexFile:
    prefix = f"vllm-{version}-"
    wheels = sorted(
        (f for f in files if f.filename.startswith(prefix) and f.filename.endswith(".whl")), key=lambda f: f.filename
    )
    if not wheels:
        raise SourceUnavailable(f"the package index has no vLLM {version} wheel: check the tag, or use --source git")
    # All platform wheels carry the same pure-Python scheduler.py; sorting makes the pick stable.
    return wheels[0]


def fetch(tag: str, progress: Progress = no_progress) -> tuple[UpstreamFile, int]:
    """Return the upstream file and the number of bytes downloaded to get it."""
    found, _, downloaded = fetch_members(tag, [UPSTREAM_PATH], progress)
    if UPSTREAM_PATH not in found:
        raise SourceUnavailable(f"vLLM {tag}'s wheel lacks {UPSTREAM_PATH}: use --source git")
    return UpstreamFile(tag=tag, data=found[UPSTREAM_PATH], origin="release"), downloaded


def fetch_members(
    tag: str, members: Collection[str], progress: Progress = no_progress
) -> tuple[dict[str, bytes], frozenset[str], int]:
    """Several files of vLLM's package at ``tag``, from one wheel session (its directory read once).

    Returns the members the wheel has (each checked against its RECORD and CRC-32), the names of
    every ``.py`` file under ``vllm/`` in the wheel (a member not among them: the release has no such
    file), and the bytes downloaded.
    """
    version = version_of(tag)
    deadline = index.Deadline.from_env()  # one budget for the listing and every range read
    wheel = choose_wheel(index.list_files("vllm", deadline=deadline), version)
    what = next(iter(members)) if len(members) == 1 else f"{len(members)} files"
    progress(f"fetching {what} from {wheel.filename} (range reads)")
    reader = index.RangeReader(wheel.url, wheel.size, deadline, sha256=wheel.sha256)
    found: dict[str, bytes] = {}
    try:
        with zipfile.ZipFile(reader) as archive:
            names = frozenset(n for n in archive.namelist() if n.startswith("vllm/") and n.endswith(".py"))
            record = archive.read(f"vllm-{version}.dist-info/RECORD")
            for member in sorted(set(members) & names):
                found[member] = archive.read(member)  # zipfile checks the member's CRC-32
    except KeyError as exc:
        raise SourceUnavailable(f"{wheel.filename} lacks {exc.args[0]}: use --source git") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise SourceUnavailable(
            f"{wheel.filename} is not a readable wheel ({type(exc).__name__}: {exc}): retry, or use --source git"
        ) from None
    for member, data in found.items():
        _check_record(record, data, wheel.filename, member)
    progress(f"fetched {reader.downloaded} bytes of {wheel.size or '?'}")
    return found, names, reader.downloaded


def _check_record(record: bytes, data: bytes, wheel: str, member: str = UPSTREAM_PATH) -> None:
    if not matches_record(record, member, data):
        raise SourceUnavailable(
            f"{member} in {wheel} does not match the wheel's RECORD hash: "
            "the download is corrupt or tampered with; retry, or use --source git"
        )

"""The released vLLM artifact of the pinned version, read member-wise from the package index."""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from generator.errors import SourceUnavailable
from generator.sources import index
from generator.sources.base import UPSTREAM_PATH, Progress, UpstreamFile, no_progress, record_digest, record_digests
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


@dataclass(frozen=True)
class OpenWheel:
    """vLLM's wheel at a release, open for range reads: its directory read, its RECORD's hashes at hand."""

    archive: zipfile.ZipFile
    reader: index.RangeReader
    wheel: index.IndexFile
    digests: dict[str, str]

    def read(self, member: str | zipfile.ZipInfo) -> bytes:
        """The member's bytes, checked against the wheel's RECORD (zipfile checks the CRC-32)."""
        data = self.archive.read(member)
        name = member if isinstance(member, str) else member.filename
        if self.digests.get(name) != record_digest(data):
            raise SourceUnavailable(
                f"{name} in {self.wheel.filename} does not match the wheel's RECORD hash: "
                "the download is corrupt or tampered with; retry, or use --source git"
            )
        return data


@contextmanager
def open_wheel(tag: str) -> Iterator[OpenWheel]:
    """vLLM's wheel at ``tag`` on the package index; a missing member or an unreadable zip is one clear line."""
    version = version_of(tag)
    deadline = index.Deadline.from_env()  # one budget for the listing and every range read
    wheel = choose_wheel(index.list_files("vllm", deadline=deadline), version)
    reader = index.RangeReader(wheel.url, wheel.size, deadline, sha256=wheel.sha256)
    try:
        with zipfile.ZipFile(reader) as archive:
            digests = record_digests(archive.read(f"vllm-{version}.dist-info/RECORD"))
            yield OpenWheel(archive, reader, wheel, digests)
    except KeyError as exc:
        raise SourceUnavailable(f"{wheel.filename} lacks {exc.args[0]}: use --source git") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise SourceUnavailable(
            f"{wheel.filename} is not a readable wheel ({type(exc).__name__}: {exc}): retry, or use --source git"
        ) from None


def fetch_members(
    tag: str, members: Collection[str], progress: Progress = no_progress
) -> tuple[dict[str, bytes], frozenset[str], int]:
    """Several files of vLLM's package at ``tag``, from one wheel session (its directory read once).

    Returns the members the wheel has (each checked against its RECORD and CRC-32), the names of
    every ``.py`` file under ``vllm/`` in the wheel (a member not among them: the release has no such
    file), and the bytes downloaded.
    """
    what = next(iter(members)) if len(members) == 1 else f"{len(members)} files"
    with open_wheel(tag) as opened:
        progress(f"fetching {what} from {opened.wheel.filename} (range reads)")
        names = frozenset(n for n in opened.archive.namelist() if n.startswith("vllm/") and n.endswith(".py"))
        found = {member: opened.read(member) for member in sorted(set(members) & names)}
    progress(f"fetched {opened.reader.downloaded} bytes of {opened.wheel.size or '?'}")
    return found, names, opened.reader.downloaded

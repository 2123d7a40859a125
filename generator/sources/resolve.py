"""Choose a source and fetch through it: the one entry point the pipeline and CLI use."""

from __future__ import annotations

import os
from enum import Enum

from generator.errors import SourceUnavailable
from generator.sources import cache, installed
from generator.sources.base import Progress, UpstreamFile, no_progress


class SourceKind(str, Enum):
    AUTO = "auto"
    GIT = "git"
    INSTALLED = "installed"
    RELEASE = "release"


def fetch_upstream(
    tag: str,
    kind: SourceKind = SourceKind.AUTO,
    vllm_repo: str | None = None,
    progress: Progress = no_progress,
) -> UpstreamFile:
    repo = vllm_repo or os.environ.get("VLLM_REPO") or None
    if kind is SourceKind.GIT or (kind is SourceKind.AUTO and repo):
        if not repo:
            raise SourceUnavailable("--source git needs a repository: pass --vllm-repo PATH_OR_URL or set VLLM_REPO")
        from generator.sources import git  # gitpython costs ~40 ms to import: only when used

        return git.fetch(tag, repo, progress)
    if kind is SourceKind.INSTALLED or (kind is SourceKind.AUTO and installed.matches(tag)):
        return installed.fetch(tag)
    if kind is SourceKind.AUTO and (cached := cache.load(tag)) is not None:
        return UpstreamFile(tag=tag, data=cached, origin="cache")
    from generator.sources import release

    upstream, _ = release.fetch(tag, progress)
    cache.store(tag, upstream.data)
    return upstream

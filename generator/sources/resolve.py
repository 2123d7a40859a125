"""Choose a source and fetch through it: the one entry point the pipeline and CLI use."""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from enum import Enum

from generator.errors import CacheMismatch, FileRefused, SourceUnavailable, UsageError
from generator.sources import cache, installed
from generator.sources.base import UPSTREAM_PATH, Progress, UpstreamFile, no_progress
from generator.tags import version_of


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
    *,
    recorded_sha256: str | None = None,
    refresh: bool = False,
) -> UpstreamFile:
    """Upstream ``scheduler.py`` at ``tag``.

    ``recorded_sha256`` is what the committed module's header says upstream was for this tag. The
    cache and an installed vLLM are only checked against themselves (sidecar, RECORD), which
    whoever altered the file can rewrite too; the committed header cannot be rewritten unnoticed,
    so a local copy that disagrees with it is refused. ``refresh`` skips the cache and fetches
    from the package index again.
    """
    repo = vllm_repo or os.environ.get("VLLM_REPO") or None
    if kind is SourceKind.GIT or (kind is SourceKind.AUTO and repo):
        if not repo:
            raise SourceUnavailable("--source git needs a repository: pass --vllm-repo PATH_OR_URL or set VLLM_REPO")
        from generator.sources import git  # gitpython costs ~40 ms to import: only when used

        return git.fetch(tag, repo, progress)
    if kind is SourceKind.INSTALLED or (kind is SourceKind.AUTO and installed.matches(tag)):
        upstream = installed.fetch(tag)
        if recorded_sha256 is not None and upstream.sha256 != recorded_sha256:
            raise CacheMismatch(
                f"the installed vLLM's {UPSTREAM_PATH} (sha256 {upstream.sha256[:12]}) is not the {tag} file the "
                f"committed module was generated from ({recorded_sha256[:12]}), though it matches its RECORD: "
                f"reinstall with `pip install --force-reinstall vllm=={version_of(tag)}`, or use --source release"
            )
        return upstream
    if kind is SourceKind.AUTO and not refresh and (cached := cache.load(tag)) is not None:
        upstream = UpstreamFile(tag=tag, data=cached, origin="cache")
        if recorded_sha256 is not None and upstream.sha256 != recorded_sha256:
            raise CacheMismatch(
                f"the cached {UPSTREAM_PATH} for {tag} in {cache.cache_root()} (sha256 {upstream.sha256[:12]}) is not "
                f"the file the committed module was generated from ({recorded_sha256[:12]}): run again with "
                "--refresh to fetch it from the package index"
            )
        return upstream
    from generator.sources import release

    upstream, _ = release.fetch(tag, progress)
    try:
        cache.store(tag, upstream.data)
    except (OSError, FileRefused) as exc:
        # The download itself succeeded and was verified: losing the cache only costs the next run.
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        progress(
            f"warning: cannot write the cache in {cache.cache_root()} ({reason}): continuing without it; "
            "set BALANCE_PATCHGEN_CACHE to a writable folder"
        )
    return upstream


def fetch_release_files(
    tag: str, paths: Collection[str], progress: Progress = no_progress, *, refresh: bool = False
) -> dict[str, bytes | None]:
    """Files of vLLM's package at release ``tag`` (None: the release has no such file), for ``census``.

    From the cache (keyed by tag and path; ``scheduler.py`` shares ``fetch_upstream``'s entry) when
    it has them and the wheel's list of files; the rest from the release wheel in one session
    (``release.fetch_members``), then cached. ``refresh`` skips the cache.
    """
    wanted = sorted(set(paths))
    out: dict[str, bytes | None] = {}
    members = None if refresh else cache.load_members(tag)
    if members is not None:
        for path in wanted:
            if path not in members:
                out[path] = None
            elif (cached := cache.load(tag, path)) is not None:
                out[path] = cached
    missing = [p for p in wanted if p not in out]
    if not missing:
        return out
    from generator.sources import release

    found, names, _ = release.fetch_members(tag, missing, progress)
    try:
        cache.store_members(tag, names)
        for path, data in found.items():
            cache.store(tag, data, path)
    except (OSError, FileRefused) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        progress(f"warning: cannot write the cache in {cache.cache_root()} ({reason}): continuing without it")
    out.update({path: found.get(path) for path in missing})
    return out


def check_refs(refs: Sequence[str], kind: SourceKind, vllm_repo: str | None) -> None:
    """Refuse refs the source cannot read, before any is fetched: only a git repository has branches."""
    from generator.sources import git

    for ref in refs:
        git.check_ref(ref, _git_location(ref, kind, vllm_repo))


def fetch_ref(ref: str, kind: SourceKind, vllm_repo: str | None, progress: Progress = no_progress) -> UpstreamFile:
    """Upstream at a git branch or commit (``matrix`` only: the pin is always a release tag)."""
    from generator.sources import git

    return git.fetch_ref(ref, _git_location(ref, kind, vllm_repo), progress)


def git_location(name: str, kind: SourceKind, vllm_repo: str | None, optional: bool = False) -> str | None:
    """The repository a git source reads ``name`` from; None (``optional``) when the source is not git.

    Not optional, ``name`` is a branch or commit, which only a git source has: refused with what to pass.
    """
    repo = vllm_repo or os.environ.get("VLLM_REPO") or None
    if kind is SourceKind.GIT or (kind is SourceKind.AUTO and repo):
        if not repo:
            raise SourceUnavailable("--source git needs a repository: pass --vllm-repo PATH_OR_URL or set VLLM_REPO")
        return repo
    if optional:
        return None
    raise UsageError(
        f"{name} is a git branch or commit, which only a git source has: pass --vllm-repo PATH_OR_URL "
        "(or set VLLM_REPO), or a release tag"
    )


def _git_location(ref: str, kind: SourceKind, vllm_repo: str | None) -> str:
    location = git_location(ref, kind, vllm_repo)
    assert location is not None
    return location

"""Upstream from a vLLM git repository: a local checkout, or a URL kept as a cached partial clone."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import git

from generator.errors import SourceUnavailable
from generator.sources import cache
from generator.sources.base import UPSTREAM_PATH, Progress, UpstreamFile, no_progress

_URL_RE = re.compile(r"^[a-z][a-z0-9+.-]*://|^[^/]+@[^/]+:")


def is_url(location: str) -> bool:
    return bool(_URL_RE.match(location))


def fetch(tag: str, location: str, progress: Progress = no_progress) -> UpstreamFile:
    repo = _cached_clone(location, tag, progress) if is_url(location) else _local_repo(location)
    try:
        commit = repo.commit(f"refs/tags/{tag}")
    except (git.BadName, ValueError, git.GitCommandError):
        raise SourceUnavailable(
            f"tag {tag} not found in {location}: fetch the tag into that repository "
            "or check .github/vllm-release-tag.commit"
        ) from None
    try:
        blob = commit.tree / UPSTREAM_PATH
        data = blob.data_stream.read()
    except KeyError:
        raise SourceUnavailable(
            f"{UPSTREAM_PATH} does not exist at {tag} in {location}: is it a vLLM repository?"
        ) from None
    except git.GitCommandError as exc:
        raise SourceUnavailable(
            f"cannot read {UPSTREAM_PATH} at {tag} ({exc.stderr.strip()}): check the network"
        ) from None
    return UpstreamFile(tag=tag, data=data, origin="git")


def _local_repo(location: str) -> git.Repo:
    path = Path(location).expanduser()
    try:
        return git.Repo(path)
    except (git.NoSuchPathError, git.InvalidGitRepositoryError):
        raise SourceUnavailable(
            f"{location} is not a git repository: pass a vLLM checkout or URL with --vllm-repo"
        ) from None


def _cached_clone(url: str, tag: str, progress: Progress) -> git.Repo:
    """A bare blob-less clone under the cache; only ``tag`` is fetched, blobs on demand."""
    path = cache.cache_root() / "git" / hashlib.sha256(url.encode()).hexdigest()[:16]
    try:
        if (path / "HEAD").exists():
            repo = git.Repo(path)
        else:
            path.mkdir(parents=True, exist_ok=True)
            repo = git.Repo.init(path, bare=True)
            repo.create_remote("origin", url)
            with repo.config_writer() as config:
                # Marks the remote as able to serve the blobs the filtered fetch left out.
                config.set_value('remote "origin"', "promisor", "true")
                config.set_value('remote "origin"', "partialclonefilter", "blob:none")
        if f"refs/tags/{tag}" not in {ref.path for ref in repo.tags}:
            progress(f"fetching tag {tag} from {url} (blob-less)")
            repo.git.fetch(
                "origin", f"+refs/tags/{tag}:refs/tags/{tag}", "--filter=blob:none", "--depth=1", "--no-tags"
            )
    except git.GitCommandError as exc:
        stderr = (exc.stderr or "").strip().splitlines()
        reason = stderr[-1] if stderr else str(exc)
        if "couldn't find remote ref" in reason:
            raise SourceUnavailable(f"tag {tag} not found in {url}: check .github/vllm-release-tag.commit") from None
        raise SourceUnavailable(f"cannot fetch {tag} from {url} ({reason}): check the URL and the network") from None
    return repo

"""Upstream from a vLLM git repository: a local checkout, or a URL kept as a cached partial clone."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

import git

from generator.errors import SourceUnavailable, UsageError
from generator.sources import cache
from generator.sources.base import UPSTREAM_PATH, Progress, UpstreamFile, no_progress
from generator.tags import is_commit

# Only transports that move data: git's `transport::address` form (ext::, fd::) runs commands,
# and an unknown scheme could be a remote helper. A location starting with "-" would be an option.
_SCHEMES = ("https://", "http://", "ssh://", "git://", "file://")
_ANY_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SCP_LIKE_RE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:(?!:)")


def is_url(location: str) -> bool:
    return location.startswith(_SCHEMES) or bool(_SCP_LIKE_RE.match(location))


def _check_location(location: str) -> None:
    if "::" in location or location.startswith("-") or (_ANY_SCHEME_RE.match(location) and not is_url(location)):
        raise UsageError(
            f"--vllm-repo {location!r} is not a path or a plain git URL: pass a local checkout, "
            "an https://, ssh://, git:// or file:// URL, or user@host:path"
        )


def fetch(tag: str, location: str, progress: Progress = no_progress) -> UpstreamFile:
    commit = tag_commit(tag, location, progress)
    return UpstreamFile(tag=tag, data=_scheduler_at(commit, tag, location), origin="git")


def tag_commit(tag: str, location: str, progress: Progress = no_progress) -> git.Commit:
    """The commit release ``tag`` names in the repository at ``location`` (a URL: its cached clone, tag fetched)."""
    _check_location(location)
    repo = _cached_clone(location, tag, progress) if is_url(location) else _local_repo(location)
    try:
        return repo.commit(f"refs/tags/{tag}")
    except (git.BadName, ValueError, git.GitCommandError):
        raise SourceUnavailable(
            f"tag {tag} not found in {location}: fetch the tag into that repository "
            "or check .github/vllm-release-tag.commit"
        ) from None


def fetch_ref(ref: str, location: str, progress: Progress = no_progress) -> UpstreamFile:
    """Upstream at a branch tip or a commit (``matrix`` only), labelled ``branch@commit12`` or ``commit12``.

    The label stands where a tag would in messages and in the in-memory module, so a failure names
    the exact commit it was found at even when the branch has moved on since.
    """
    label, commit = ref_commit(ref, location, progress)
    return UpstreamFile(tag=label, data=_scheduler_at(commit, label, location), origin="git")


def ref_commit(ref: str, location: str, progress: Progress = no_progress) -> tuple[str, git.Commit]:
    """A branch's tip (fetched again: branches move) or a commit, with its label (``branch@commit12``)."""
    check_ref(ref, location)
    commit_id = is_commit(ref)
    if is_url(location):
        repo = _cached_clone(location, None, progress)
        wanted = ref if commit_id else f"refs/remotes/origin/{ref}"
        _fetch_ref(repo, location, ref, commit_id, progress)
    else:
        repo = _local_repo(location)
        wanted = (
            ref
            if commit_id
            else next(
                (name for name in (f"refs/heads/{ref}", f"refs/remotes/origin/{ref}") if _exists(repo, name)),
                f"refs/heads/{ref}",
            )
        )
    what = "commit" if commit_id else "branch"
    try:
        commit = repo.commit(wanted)
    except (git.BadName, ValueError, git.GitCommandError):
        raise SourceUnavailable(f"{what} {ref} not found in {location}: check the name, or fetch it there") from None
    return (commit.hexsha[:12] if commit_id else f"{ref}@{commit.hexsha[:12]}"), commit


def python_files(commit: git.Commit) -> dict[str, git.Blob]:
    """Every ``vllm/**/*.py`` blob of the commit's tree (read lazily: a blob-less clone fetches on read)."""
    try:
        top = commit.tree / "vllm"
    except KeyError:
        return {}
    return {
        str(item.path): item for item in top.traverse() if isinstance(item, git.Blob) and str(item.path).endswith(".py")
    }


def commits_touching(
    location: str, old: str, new: str, path: str, lines: tuple[int, int] | None
) -> list[tuple[str, str]] | None:
    """(sha12, subject) of the commits from ``old`` to ``new`` that touched ``lines`` of ``path`` at ``new``
    (the whole file when None), newest first; None when the history is not there (a depth-1 clone)."""
    try:
        repo = _cached_clone(location, None, no_progress) if is_url(location) else _local_repo(location)
        span = ["-L", f"{lines[0]},{lines[1]}:{path}", "--no-patch"] if lines else ["--", path]
        out = repo.git.log("--format=%h%x09%s", "--abbrev=12", f"{old}..{new}", *span)
    except (git.GitCommandError, SourceUnavailable, UsageError):
        return None
    rows = [line.split("\t", 1) for line in out.splitlines() if "\t" in line]
    return [(sha, subject) for sha, subject in rows]


def check_ref(ref: str, location: str) -> None:
    """Refuse, before anything is fetched, what ``location`` could never answer for ``ref``."""
    _check_location(location)
    if is_url(location) and is_commit(ref) and len(ref) != 40:
        raise UsageError(
            f"commit {ref} is abbreviated: a remote repository is asked for commits by their full 40-digit sha"
        )


def _exists(repo: git.Repo, name: str) -> bool:
    try:
        repo.commit(name)
    except (git.BadName, ValueError, git.GitCommandError):
        return False
    return True


def _scheduler_at(commit: git.Commit, label: str, location: str) -> bytes:
    try:
        blob = commit.tree / UPSTREAM_PATH
        data: bytes = blob.data_stream.read()
    except KeyError:
        raise SourceUnavailable(
            f"{UPSTREAM_PATH} does not exist at {label} in {location}: is it a vLLM repository?"
        ) from None
    except git.GitCommandError as exc:
        raise SourceUnavailable(
            f"cannot read {UPSTREAM_PATH} at {label} ({exc.stderr.strip()}): check the network"
        ) from None
    return data


def _local_repo(location: str) -> git.Repo:
    path = Path(location).expanduser()
    try:
        return git.Repo(path)
    except (git.NoSuchPathError, git.InvalidGitRepositoryError):
        raise SourceUnavailable(
            f"{location} is not a git repository: pass a vLLM checkout or URL with --vllm-repo"
        ) from None


def _usable_clone(path: Path, url: str, progress: Progress) -> git.Repo | None:
    """The cached clone at ``path`` if it is complete; a broken one is removed, never reused."""
    if not os.path.lexists(path):
        return None
    try:
        repo = git.Repo(path)
        complete = (
            repo.bare
            and repo.git.config("--get", "remote.origin.url") == url
            and repo.git.config("--get", "remote.origin.partialclonefilter") == "blob:none"
        )
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.GitCommandError, ValueError, OSError):
        complete = False
    if complete:
        return repo
    progress(f"replacing the incomplete cached clone at {path}")
    _remove(path)
    return None


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)


def _new_clone(path: Path, url: str) -> git.Repo:
    """Set up the clone in a temporary folder and rename it into place only once it is complete.

    A kill halfway (after ``init``, before the remote is configured) then leaves a ``.tmp`` folder
    that nothing reads, instead of a repository that every later run would reuse.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        repo = git.Repo.init(tmp, bare=True)
        repo.create_remote("origin", url)
        with repo.config_writer() as config:
            # Marks the remote as able to serve the blobs the filtered fetch left out.
            config.set_value('remote "origin"', "promisor", "true")
            config.set_value('remote "origin"', "partialclonefilter", "blob:none")
        repo.close()
        try:
            os.rename(tmp, path)
        except OSError:
            if not os.path.lexists(path):
                raise
            shutil.rmtree(tmp)  # another run renamed its own complete clone into place first
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return git.Repo(path)


def _cached_clone(url: str, tag: str | None, progress: Progress) -> git.Repo:
    """A bare blob-less clone under the cache; only ``tag`` is fetched (if any), blobs on demand."""
    path = cache.cache_root() / "git" / hashlib.sha256(url.encode()).hexdigest()[:16]
    try:
        repo = _usable_clone(path, url, progress) or _new_clone(path, url)
        if tag is not None and f"refs/tags/{tag}" not in {ref.path for ref in repo.tags}:
            progress(f"fetching tag {tag} from {url} (blob-less)")
            repo.git.fetch(
                "origin", f"+refs/tags/{tag}:refs/tags/{tag}", "--filter=blob:none", "--depth=1", "--no-tags"
            )
    except git.GitCommandError as exc:
        reason = _last_line(exc)
        if "couldn't find remote ref" in reason:
            raise SourceUnavailable(f"tag {tag} not found in {url}: check .github/vllm-release-tag.commit") from None
        raise SourceUnavailable(f"cannot fetch {tag} from {url} ({reason}): check the URL and the network") from None
    return repo


def _fetch_ref(repo: git.Repo, url: str, ref: str, commit_id: bool, progress: Progress) -> None:
    """Bring a branch's current tip (always: branches move) or a commit (once) into the cached clone."""
    if commit_id and _exists(repo, ref):
        return
    progress(f"fetching {'commit' if commit_id else 'branch'} {ref} from {url} (blob-less)")
    refspec = ref if commit_id else f"+refs/heads/{ref}:refs/remotes/origin/{ref}"
    try:
        repo.git.fetch("origin", refspec, "--filter=blob:none", "--depth=1", "--no-tags")
    except git.GitCommandError as exc:
        reason = _last_line(exc)
        if "couldn't find remote ref" in reason or "not our ref" in reason:
            what = "commit" if commit_id else "branch"
            raise SourceUnavailable(f"{what} {ref} not found in {url}: check the name") from None
        raise SourceUnavailable(f"cannot fetch {ref} from {url} ({reason}): check the URL and the network") from None


def _last_line(exc: git.GitCommandError) -> str:
    stderr = str(exc.stderr or "").strip().splitlines()
    return stderr[-1] if stderr else str(exc)

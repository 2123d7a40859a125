"""Whether a write into someone's tree would mix with their uncommitted work, as ``cargo fix`` asks.

A write of ``adapt`` (or ``bump --adapt``) should be one reviewable, revertible diff: ``git diff`` shows it
alone, ``git checkout -- .`` undoes it. So the files it would write must have no uncommitted changes (staged,
unstaged, or untracked: a new file the user has not committed) in the git working tree that holds them. A
tree that is no git working tree is not judged (there is no diff to keep apart).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import git


def uncommitted(paths: Iterable[Path]) -> list[str]:
    """Those of ``paths`` with uncommitted changes in their git working tree, relative to it, sorted."""
    files = [p.resolve() for p in paths]
    if not files:
        return []
    try:
        repo = git.Repo(files[0].parent, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return []
    if repo.bare or repo.working_tree_dir is None:
        return []
    top = Path(repo.working_tree_dir).resolve()
    inside = [p.relative_to(top).as_posix() for p in files if p.is_relative_to(top)]
    if not inside:
        return []
    try:
        status = repo.git.status("--porcelain=v1", "-z", "--untracked-files=all", "--", *inside)
    except git.GitCommandError:
        return []
    found = set()
    entries = status.split("\0")
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        code, name = entry[:2], entry[3:]
        if code[0] in "RC":  # a rename or copy: the next entry is its source
            index += 1
        found.add(name)
    return sorted(found & set(inside))

"""The commits between two releases that touched a changed definition, read from a git source (``git log -L``)."""

from __future__ import annotations

from collections.abc import Callable

from generator.judge.couplings import changes
from generator.judge.couplings.changes import Change
from generator.sources import git

Commits = Callable[[Change], tuple[tuple[str, str], ...] | None]


def reader(location: str, old: str, new: str) -> Commits:
    """For each changed definition: the commits from ``old`` to ``new`` that touched its lines at ``new``.

    A removed one has no lines at ``new``: the commits that touched its file. None: the history is not in
    the repository (a depth-1 clone), which ``--vllm-repo`` pointed at a full checkout has.
    """

    def commits(change: Change) -> tuple[tuple[str, str], ...] | None:
        definition = change.new or change.old
        if definition is None:
            return None
        lines = changes.lines_of(definition) if change.new is not None else None
        found = git.commits_touching(location, old, new, definition.path, lines)
        return None if found is None else tuple(found)

    return commits

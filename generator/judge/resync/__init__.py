"""Re-sync one copy of a vLLM function: base A's function, ours the tree's copy, theirs B's function.

``resync`` is a pure function (three texts in, a result out): the merge (``merge``) proposes a
text, and the independent check (``check``) must find in it every one of B's changes and every one
of the copy's own edits, or the result is a conflict. A copy is written only from ``Merged``. A
docstring both sides changed is the copy's (``docstrings``): B's rewording is not one of its changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from generator.judge.resync import check, docstrings
from generator.judge.resync.merge import MergeConflict, Unmergeable, merge_function, parse_function


@dataclass(frozen=True)
class Merged:
    text: str  # the copy's new text, indented as the copy was


@dataclass(frozen=True)
class Unchanged:
    """Upstream's function is the same statements at A and B: nothing to do."""


@dataclass(frozen=True)
class Redundant:
    """The copy is B's function, statement for statement: upstream's definition can replace it."""


@dataclass(frozen=True)
class Conflict:
    reason: str  # one line
    base: str = ""  # the statements of all three where they clash (empty when the check refused)
    ours: str = ""
    theirs: str = ""
    line: int = 0  # in the copy, 1-based from its first line


Result = Merged | Unchanged | Redundant | Conflict


def resync(base: str, ours: str, theirs: str) -> Result:
    """The copy ``ours`` with upstream's changes from ``base`` to ``theirs``, or why not."""
    try:
        sides = parse_function(base), parse_function(ours), parse_function(theirs)
    except Unmergeable as exc:
        return Conflict(f"a function {exc}")
    keys = [check._keys(text) for text in (base, ours, theirs)]
    if keys[1] == keys[2]:
        return Redundant()
    if keys[0] == keys[2]:
        return Unchanged()
    if (carried := docstrings.carried(base, ours, theirs)) != (base, theirs):
        try:
            sides = (parse_function(carried[0]), sides[1], parse_function(carried[1]))
            base, theirs = carried
        except Unmergeable:
            pass  # the texts as they are: the docstrings then meet as any statement would
    try:
        text = merge_function(*sides)
    except MergeConflict as exc:
        return Conflict(str(exc), exc.base, exc.ours, exc.theirs, exc.line)
    except Unmergeable as exc:
        return Conflict(f"the copy cannot be merged by lines: {exc}")
    problem = check.problems(base, ours, theirs, text)
    if problem:
        return Conflict(f"merge refused by the independent check: {problem}")
    return Merged(text)


__all__ = ["Conflict", "Merged", "Redundant", "Result", "Unchanged", "resync"]

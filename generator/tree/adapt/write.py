"""A plan written into the tree, all files or none, and only over the bytes it was made from."""

from __future__ import annotations

import difflib
from pathlib import Path

from generator.atomic import write_all_or_nothing
from generator.errors import SiteChanged
from generator.tree.adapt.plan import Plan


def diff(plan: Plan, root: Path) -> str:
    """The unified diff of every file the plan changes, by path."""
    out: list[str] = []
    for path in sorted(plan.write):
        rel = path.relative_to(root).as_posix()
        old = plan.read[path].decode("utf-8").splitlines(keepends=True)
        new = plan.write[path].decode("utf-8").splitlines(keepends=True)
        out += difflib.unified_diff(old, new, f"a/{rel}", f"b/{rel}")
    return "".join(out)


def checked(plan: Plan) -> dict[Path, bytes]:
    """The plan's files by path, to write in one transaction; refused when any is not what was read."""
    for path, was in sorted(plan.read.items()):
        try:
            now = path.read_bytes()
        except OSError:
            now = None
        if now != was:
            raise SiteChanged(f"{path} changed on disk since adapt read it: nothing written, run adapt again")
    return dict(sorted(plan.write.items()))


def apply(plan: Plan) -> None:
    """Write the plan; refused, with nothing written, when any of its files is not what was read."""
    write_all_or_nothing(checked(plan))

"""The records every pass of ``impact`` reads and writes: a coupling (one place of the tree on one vLLM name) and
a judged name (what became of it between the two releases), and what a tree's test patch is."""

from __future__ import annotations

from dataclasses import dataclass

from generator.judge.couplings.changes import Change
from generator.judge.couplings.signatures import Receiver

TEST_PATCHES = ("mock.patch", "mock.patch.object", "monkeypatch.setattr")


@dataclass(frozen=True)
class Coupling:
    """One place of the tree that depends on one vLLM definition, and what became of that definition."""

    kind: str  # copy | patch | override | import | declared
    path: str
    line: int
    upstream: str  # the vLLM name as the tree reaches it (through its imports and aliases)
    detail: str = ""
    why: str = ""  # a site that touches vLLM but cannot be named statically (status unresolved)
    status: str = ""
    name: str = ""  # where the name is defined (at A, else at B)
    declared: bool | None = None  # a patch, in a tree with a registry: does the registry declare it
    touched: bool | None = None  # a declared symbol: does the tree's code touch it
    overlap: tuple[str, ...] = ()  # a copy: A's statements that upstream changed and the copy's edits touch
    verdict: str = ""  # breaks | review | info (verdicts.RULES)
    rule: str = ""  # the rule that gave the verdict
    reason: str = ""  # the rule's words for this coupling
    at_line: int = 0  # the line of the site's file the rule points at when it is not the site's (a refused call)
    # An import statement of vLLM's: the module it imports, which must be a file of the release (no package's
    # ``__getattr__`` serves it); "" for any other coupling, and for an import through the tree's own modules.
    imports: str = ""
    own: bool = False  # a patch of the tree's own module's name, bound to the vLLM name by the tree's import
    installs: Receiver | None = None  # a patch: the tree's function it installs, when the tree defines it
    at_path: str = ""  # the file of ``at_line``, when not the site's
    at_end: int = 0  # the rule points at a function (B's call reaches it): its last line
    receiver: str = ""  # that function's qualified name
    creates: bool = False  # a test's patch that adds the attribute when it is missing (create=True, raising=False)

    @property
    def site(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Symbol:
    """One vLLM name many couplings can share, judged once."""

    name: str
    change: Change
    commits: tuple[tuple[str, str], ...] | None = None  # (sha, subject), with a git source; None: not known
    # Where the ways of reaching the name part (an import statement whose module is a file at one release only,
    # against an attribute access a package's ``__getattr__`` serves): each other way's change, by the module
    # its import statement imports ("" for the rest). ``change`` is the import statement's, then.
    ways: tuple[tuple[str, Change], ...] = ()

    def change_for(self, imports: str) -> Change:
        """The change as a coupling that reaches the name this way sees it (``Coupling.imports``)."""
        return next((c for m, c in self.ways if m == imports), self.change)


def is_test(path: str) -> bool:
    """A file of the tree's tests (its patches are a test's, never the tree's start-up patches)."""
    parts = path.split("/")
    name = parts[-1]
    return bool({"tests", "test"} & set(parts[:-1])) or name.startswith("test_") or name in ("conftest.py",)

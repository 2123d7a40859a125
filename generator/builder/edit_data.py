"""A data edit as a spec declares it, and the shape checks a spec's code must pass (stdlib ``ast`` only).

``edits`` applies them; ``tree.layout`` reads them from a spec, so this module stays free of libcst.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from typing import Protocol

from generator.errors import UsageError
from generator.tags import is_release_tag, tag_key

KINDS = ("before", "after", "instead")


@dataclass(frozen=True)
class Edit:
    """One data edit: ``anchor`` (statements, capitals standing for any code) must match exactly once."""

    name: str
    anchor: str
    kind: str  # before | after | instead
    code: str  # the copy's own statements, as the copy writes them ("" with instead: delete)
    # The last vLLM release the edit is written for, and why it stops there: past it (a later release, or a
    # git ref) the edit refuses with ``why``, a decision a maintainer takes in the spec, never a guess.
    until: str | None = None
    why: str = ""

    def written_for(self, tag: str) -> bool:
        """Whether the edit is written for a copy at ``tag`` (no ``until``, or a release up to it)."""
        return self.until is None or (is_release_tag(tag) and tag_key(tag) <= tag_key(self.until))


class EditedCopy(Protocol):
    """What applying edits reads of a copy's spec (``tree.layout.CopySpec`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def upstream_class(self) -> str: ...
    @property
    def upstream_method(self) -> str: ...
    @property
    def edits(self) -> tuple[Edit, ...]: ...


def check_statements(code: str, where: str) -> None:
    """Refuse, as bad input, code that is not one or more whole statements."""
    try:
        body = ast.parse(dedent(code)).body
    except SyntaxError as exc:
        raise UsageError(f"{where} does not parse as Python statements (line {exc.lineno}): fix the spec") from None
    if not body:
        raise UsageError(f"{where} holds no statement: write the statements, see docs/copies.md")


def dedent(code: str) -> str:
    return textwrap.dedent(code.strip("\n")) + "\n"

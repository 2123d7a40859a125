"""The copied method as a marked region of a consumer's file: found, rendered, put back.

The tool owns only the lines between its markers (as cog does); every other byte of the file is the
tree's own. Before the first adoption there are no markers: the region is the method as the class
holds it (decorators to last line). The markers say where the copy came from, that it is generated,
and how to regenerate it; ``# fmt: off``/``# fmt: on`` keep the tree's formatter (ruff or black,
often at another line length) off upstream's bytes, so the drift gate and the formatter never fight.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from generator.errors import TreeRefused
from generator.tree.layout import CopySpec

BEGIN = ">>> balance-patchgen: "
END = "<<< balance-patchgen: end of "
_BEGIN_RE = re.compile(r"^(?P<indent>[ \t]*)# >>> balance-patchgen: (?P<label>\S+) is vLLM (?P<tag>\S+)'s ")
_FIELD_RE = re.compile(r"^[ \t]*# >>> (?P<key>[a-z ]+): (?P<value>.*)$")
FMT_OFF, FMT_ON = "# fmt: off", "# fmt: on"


@dataclass(frozen=True)
class Region:
    start: int  # first line of the region, 0-based
    end: int  # one past its last line
    indent: str
    marked: bool
    method: ast.FunctionDef  # the copy as the file holds it now
    tag: str | None = None  # what the begin marker says it was generated from
    fields: dict[str, str] = field(default_factory=dict)


def _method(tree: ast.Module, spec: CopySpec, shown: str) -> ast.FunctionDef:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == spec.dest_class]
    if len(classes) != 1:
        raise TreeRefused(
            f"{shown} holds {len(classes)} top-level classes {spec.dest_class}, expected one: "
            f"fix the destination of copy {spec.name!r} (or the file)"
        )
    methods = [n for n in classes[0].body if isinstance(n, ast.FunctionDef) and n.name == spec.dest_method]
    if len(methods) != 1:
        raise TreeRefused(
            f"{shown}: class {spec.dest_class} has {len(methods)} methods {spec.dest_method}(), expected one: "
            f"the copy {spec.label} must exist before it can be regenerated (write a stub to adopt it)"
        )
    return methods[0]


def locate(text: str, spec: CopySpec, shown: str) -> Region:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise TreeRefused(f"{shown} does not parse (line {exc.lineno}): fix the file, then run again") from None
    method = _method(tree, spec, shown)
    lines = text.splitlines(keepends=True)
    begins = [n for n, line in enumerate(lines) if (m := _BEGIN_RE.match(line)) and m["label"] == spec.label]
    ends = [n for n, line in enumerate(lines) if line.strip() == f"# {END}{spec.label}"]
    first = min([method.lineno, *(d.lineno for d in method.decorator_list)]) - 1
    last = method.end_lineno or method.lineno
    if not begins and not ends:
        indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
        return Region(first, last, indent, marked=False, method=method)
    if len(begins) != 1 or len(ends) != 1 or not begins[0] < first < last <= ends[0]:
        raise TreeRefused(
            f"{shown}: the markers of {spec.label} are broken ({len(begins)} begin, {len(ends)} end, or not around "
            f"the method): restore them from git, or delete both to adopt the method afresh"
        )
    begin = _BEGIN_RE.match(lines[begins[0]])
    assert begin is not None
    fields = {}
    for line in lines[begins[0] + 1 : first]:
        if (m := _FIELD_RE.match(line)) is not None:
            fields[m["key"]] = m["value"].strip()
    return Region(begins[0], ends[0] + 1, begin["indent"], True, method, begin["tag"], fields)


def rendered_method(rendered: str) -> ast.FunctionDef:
    """The method a region ``render`` wrote holds (its lines sit at the class body's indentation)."""
    (holder,) = ast.parse(f"class _:\n{rendered}").body
    assert isinstance(holder, ast.ClassDef)
    (method,) = [n for n in holder.body if isinstance(n, ast.FunctionDef)]
    return method


def render(
    method_text: str, spec: CopySpec, *, tag: str, sha256: str, edits: str, fields: dict[str, str], indent: str
) -> str:
    """The region: markers around the method's text (already at the class's indentation)."""
    head = [
        f"# {BEGIN}{spec.label} is vLLM {tag}'s {spec.upstream_class}.{spec.upstream_method} plus the edits "
        "below. DO NOT EDIT.",
        f"# >>> upstream: {spec.upstream_file} sha256 {sha256}",
        f"# >>> edits: {edits}",
        *(f"# >>> {key}: {value}" for key, value in fields.items()),
        "# >>> regenerate: `balance-patchgen --root . regen`; drift gate: `balance-patchgen --root . check`",
        FMT_OFF,
    ]
    tail = [FMT_ON, f"# {END}{spec.label}"]
    body = method_text if method_text.endswith("\n") else method_text + "\n"
    return "".join(f"{indent}{h}\n" for h in head) + body + "".join(f"{indent}{t}\n" for t in tail)


def replace(text: str, region: Region, new: str) -> str:
    lines = text.splitlines(keepends=True)
    if region.end == len(lines) and lines and not lines[-1].endswith("\n"):
        new = new.rstrip("\n")  # the file had no final newline: keep it that way
    return "".join([*lines[: region.start], new, *lines[region.end :]])

"""The pure core for a consumer's tree: a copy's file text in, its regenerated text out, and what changed.

For each declared copy (``layout``): upstream's function at the tag, the copy's edits (the balance
deltas written in the gate form and with the leader the tree's own code uses, then the spec's data
edits), rendered at the class's indentation between markers (``region``), in place of the copy
the file holds. Outside the region only what the new copy needs is changed, and reported: the
count the tree's gather sends (upstream's cap count changes between releases) and import lines
for names the new body uses that the file does not bind. No I/O: the CLI reads and writes.
"""

from __future__ import annotations

import ast
import builtins
import copy as copying
import difflib
import symtable
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from generator.builder import astpattern, copy_forms, deltas, edits, extract, imports
from generator.builder.render import _without_leading_blanks
from generator.errors import EditDoesNotApply, TreeRefused
from generator.judge import migrate, provenance
from generator.sources.base import UpstreamFile
from generator.tags import version_key, version_of
from generator.tree import region
from generator.tree.layout import SPEC_FILE, CopySpec

GATE_FORM = "gate form"  # the begin marker's field naming the delta-2 form the copy is written in
# Which leader a class reads, by the balance state its own (hand-written) code keeps.
_LEADER_BY_STATE = {
    "balance_queue": "max(t.item() for t in self.balance_queue)",
    copy_forms.LEADER_COUNT: f"self.{copy_forms.LEADER_COUNT}",
}


@dataclass(frozen=True)
class Built:
    """One copy regenerated: the file's new text and what a maintainer should read about it."""

    spec: CopySpec
    old: str
    new: str
    tag: str
    summary: str  # what the edits did, one line
    outside: str  # unified diff of the changes outside the region ("" when none)
    where: region.Region  # where the copy stood in ``old`` (located once, here)
    notes: tuple[str, ...] = field(default=())
    kept: bool = False  # not rewritten (hand-kept, or a spec written for later releases than the pin)
    rendered: str = ""  # the region written in its place ("" when kept)

    @property
    def changed(self) -> bool:
        return self.old != self.new


def _method_text(module: cst.Module, method: cst.FunctionDef, indent: str) -> str:
    """The method at the class's indentation, upstream's bytes kept (strings included)."""
    if indent != module.default_indent:
        raise TreeRefused(
            f"the copy is indented {indent!r} but upstream's class body {module.default_indent!r}: "
            "upstream's text cannot be kept byte for byte at another indentation"
        )
    method = method.with_changes(leading_lines=_without_leading_blanks(method.leading_lines))
    holder = cst.ClassDef(name=cst.Name("_"), body=cst.IndentedBlock(body=[method]))
    return module.code_for_node(holder).split("\n", 1)[1]


def _class_outside(tree: ast.Module, spec: CopySpec) -> list[ast.stmt]:
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == spec.dest_class]
    return [n for n in cls.body if not (isinstance(n, ast.FunctionDef) and n.name == spec.dest_method)]


def _leader(tree: ast.Module, spec: CopySpec, old_gates: Sequence[str]) -> str:
    """The leader's count as the tree's own code keeps it (its gather's target), else as its copy reads it."""
    state = {
        n.attr
        for stmt in _class_outside(tree, spec)
        for n in ast.walk(stmt)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
    }
    kept = [leader for attr, leader in _LEADER_BY_STATE.items() if attr in state]
    if len(kept) == 1:
        return kept[0]
    if len(set(old_gates)) == 1:
        return old_gates[0]
    raise TreeRefused(
        f"class {spec.dest_class} keeps {' and '.join(kept) or 'neither'} of self.balance_queue and "
        f"self.{copy_forms.LEADER_COUNT}, and its copy reads {len(set(old_gates))} leaders: the gate cannot tell "
        "which count the tree gathers; keep one of them (docs/adopting.md)"
    )


def _old_form(method: ast.FunctionDef, spec: CopySpec, shown: str) -> tuple[str, list[str]]:
    """The delta-2 form and leader(s) the copy is written in now, as ``migrate`` recognizes them."""
    stripped = migrate.strip(copying.deepcopy(method))
    forms = sorted({d.form for d in stripped.deltas if d.number == 2})
    if len(forms) != 1:
        raise TreeRefused(
            f"{shown}: {spec.label} carries its gate in {len(forms)} of the forms migrate knows "
            f"({', '.join(copy_forms.gate_form_names())}): write the gate in one of them, or set gate_form "
            "in balance-patchgen.toml (docs/adopting.md)"
        )
    return forms[0], [g.leader for g in stripped.gates]


def _gate_form(spec: CopySpec, where: region.Region, shown: str) -> tuple[str, list[str]]:
    _, leaders = _old_form(where.method, spec, shown) if not (spec.gate_form or where.marked) else ("", [])
    if spec.gate_form:
        return spec.gate_form, leaders
    if where.marked and GATE_FORM in where.fields:
        name = where.fields[GATE_FORM]
        if name not in copy_forms.gate_form_names():
            raise TreeRefused(
                f"{shown}: the marker names gate form {name!r}, which migrate does not know "
                f"({', '.join(copy_forms.gate_form_names())}): restore the marker from git"
            )
        return name, leaders
    return _old_form(where.method, spec, shown)


def hand_kept(spec: CopySpec, upstream: UpstreamFile, text: str, shown: str) -> Built:
    """A copy kept by hand: unchanged, with how many statements it differs from upstream's at the tag."""
    where = region.locate(text, spec, shown)
    module = extract.parse(upstream.text, upstream.tag)
    extract.extract(module, upstream.tag, spec.upstream_class, spec.upstream_method)  # it must still exist
    mine = provenance.reduce(where.method)
    theirs = provenance.reduce(
        provenance.methods_named(ast.parse(upstream.text), spec.upstream_class, spec.upstream_method)[0]
    )
    edits_found = provenance.edits(mine, theirs)
    n = sum(e.statements for e in edits_found)
    summary = (
        f"hand-kept, {n} statement{'s' * (n != 1)} from upstream {upstream.tag}'s "
        f"{spec.upstream_class}.{spec.upstream_method} in {len(edits_found)} runs (not rewritten)"
    )
    return Built(spec, text, text, upstream.tag, summary, "", where, kept=True)


def _before_its_spec(spec: CopySpec, where: region.Region, tag: str) -> bool:
    if spec.since is None or where.marked:
        return False
    return bool(version_key(version_of(tag)) < version_key(version_of(spec.since)))


def build(spec: CopySpec, upstream: UpstreamFile, text: str, shown: str) -> Built:
    """``text`` (the destination file) with the copy regenerated from ``upstream``."""
    if spec.hand_kept:
        return hand_kept(spec, upstream, text, shown)
    where = region.locate(text, spec, shown)
    if _before_its_spec(spec, where, upstream.tag):
        why = (
            f"kept as it is: its spec {spec.name!r} is written for vLLM {spec.since} on, the pin is {upstream.tag} "
            "(declare the copy's edits at this release in balance-patchgen.toml to generate it)"
        )
        return Built(spec, text, text, upstream.tag, why, "", where, kept=True)
    module = extract.parse(upstream.text, upstream.tag)
    method = extract.extract(module, upstream.tag, spec.upstream_class, spec.upstream_method).method
    fields: dict[str, str] = {}
    summary: list[str] = []
    cap = None
    tree = ast.parse(text)
    if spec.is_balance:
        form, old_leaders = _gate_form(spec, where, shown)
        leader = _leader(tree, spec, old_leaders)
        chosen = (
            deltas.DisabledPathDelegates(),
            deltas.LeaderAtCapFreezes(copy_forms.gate_form(form).code, leader),
            deltas.QueueNoneBreaks(),
        )
        patched = deltas.apply_all(method, deltas.DeltaContext(upstream.tag, module), chosen)
        method, cap = patched.method, patched.cap
        fields[GATE_FORM] = form
        applied = [str(o.number) for o in patched.outcomes if o.applied]
        skipped = [f"{o.number} not needed at {upstream.tag}" for o in patched.outcomes if not o.applied]
        summary.append(f"balance deltas {', '.join(applied)}" + "".join(f"; {s}" for s in skipped))
    if spec.edits:
        method, done = _edited(module, method, spec, upstream)
        names = ", ".join(e.name for e in spec.edits)
        summary.append(f"{len(done)} edit{'s' * (len(done) != 1)} of spec {spec.name!r}: {names}")
    method_text = _method_text(module, method, where.indent)
    edits_line = "; ".join(summary)
    new_region = region.render(
        method_text,
        spec,
        tag=upstream.tag,
        sha256=upstream.sha256,
        edits=edits_line,
        fields=fields,
        indent=where.indent,
    )
    replaced = region.replace(text, where, new_region)
    notes: list[str] = []
    final = replaced
    if cap is not None:
        final, note = _with_payload(final, spec, cap.count, shown)
        notes += note
    final, note = _with_imports(final, method_text, module, upstream.tag)
    notes += note
    outside = "".join(difflib.unified_diff(replaced.splitlines(True), final.splitlines(True), shown, shown, n=2))
    return Built(spec, text, final, upstream.tag, edits_line, outside, where, tuple(notes), rendered=new_region)


def _edited(
    module: cst.Module, method: cst.FunctionDef, spec: CopySpec, upstream: UpstreamFile
) -> tuple[cst.FunctionDef, tuple[edits.Applied, ...]]:
    """The spec's edits applied; a shipped spec's refusal names where the tree fixes it (its own copy)."""
    try:
        return edits.apply(module, method, spec, tag=upstream.tag, upstream_text=upstream.text)
    except EditDoesNotApply as error:
        if not spec.shipped:
            raise
        message = str(error).removesuffix(", or keep the pin")
        raise EditDoesNotApply(
            f"{message} (this spec is built in: `balance-patchgen --root . specs export` writes the built-in "
            f"specs into the tree's {SPEC_FILE}, which then wins; see docs/adopting.md), or keep the pin",
            spec=error.spec,
            edit=error.edit,
            detail=error.detail,
        ) from None


def _with_payload(text: str, spec: CopySpec, count: str, shown: str) -> tuple[str, list[str]]:
    """The tree's gather sends upstream's cap count at the tag (the gate asks upstream's question of it)."""
    tree = ast.parse(text)
    found: list[ast.expr] = []
    for method_name, code in copy_forms.PAYLOADS:
        (pattern,) = astpattern.statements(code)
        target = pattern.value if isinstance(pattern, ast.Expr) else pattern
        for stmt in _class_outside(tree, spec):
            if not (isinstance(stmt, ast.FunctionDef) and stmt.name == method_name):
                continue
            for node in ast.walk(stmt):
                captures: dict[str, astpattern.Captured] = {}
                if type(node) is type(target) and astpattern.match(target, node, captures):
                    value = captures.get("COUNT")
                    if isinstance(value, ast.expr):
                        found.append(value)
    if len(found) != 1:
        return text, [
            f"note: {len(found)} gathers of a count found in {spec.dest_class} "
            f"({' or '.join(m for m, _ in copy_forms.PAYLOADS)}): check by hand that each rank sends `{count}`"
        ]
    (node,) = found
    wanted = astpattern.expression(count)
    if ast.dump(node) == ast.dump(wanted):
        return text, []
    new = f"({count})" if "\n" in count else count
    return _replace_span(text, node, new), [
        f"the gather now sends upstream's cap count `{count}` (was `{ast.unparse(node)}`)"
    ]


def _replace_span(text: str, node: ast.expr, new: str) -> str:
    """Replace ``node``'s source span (ast columns are UTF-8 byte offsets)."""
    lines = text.splitlines(keepends=True)
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    head = lines[first].encode()[: node.col_offset].decode()
    tail = lines[last].encode()[node.end_col_offset :].decode()
    return "".join([*lines[:first], head + new + tail, *lines[last + 1 :]])


def _bound_at_top(text: str) -> set[str]:
    top = symtable.symtable(text, "<tree file>", "exec")
    return {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}


def _with_imports(text: str, method_text: str, module: cst.Module, tag: str) -> tuple[str, list[str]]:
    """Import lines, from upstream's module, for names the new copy reads and the file does not bind."""
    names = imports.free_names("class _:\n" + method_text) - _bound_at_top(text) - {"_"}
    names = {n for n in names if not hasattr(builtins, n)}
    if not names:
        return text, []
    block = imports.resolve(names, imports.module_bindings(extract.top_level(module)), tag=tag)
    lines = [*[line for group in block.runtime for line in group], *block.type_checking]
    tree = ast.parse(text)
    at = 0
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            at = stmt.end_lineno or stmt.lineno
        elif not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            break
    kept = text.splitlines(keepends=True)
    added = "".join(f"{line}\n" for line in lines)
    return "".join([*kept[:at], added, *kept[at:]]), [
        f"adds `{line.splitlines()[0]}`: the copy at {tag} reads it and the file does not import it" for line in lines
    ]

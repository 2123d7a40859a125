"""Judge a hand-kept copy of ``schedule()``: which deltas it carries, which release it is, what else it edits.

A copy (vllm-ascend's own ``patch_balance_schedule.py``, or this project's generated module) carries
the balance deltas in one of the forms ``copy_forms.py`` declares. Those are taken out (delta 3 gives
back upstream's assert); what is left is compared, statement by statement (``provenance``), with
upstream's ``schedule()`` at the tag the copy is paired with, and when it is not that, with every
release scanned: the one it equals, or the closest. Whatever differs from that release, and anything
in the disabled path besides the return, is an *extra edit*, reported with its lines. When the cap
check or the gate asks another question than upstream's at the tag, that is said in words
(``capcheck``). Stdlib ``ast`` only.
"""

from __future__ import annotations

import ast
import copy as copying
import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from generator.builder import astpattern, copy_forms
from generator.builder.verify import methods_named
from generator.errors import VerificationFailed
from generator.judge import capcheck, provenance
from generator.tags import version_key, version_of

METHOD = "schedule"
_BALANCE_STATE = ("balance_queue", "balance_leader_running", "_balance_enabled")
DISABLED_PATH = "the disabled path"


@dataclass(frozen=True)
class FoundDelta:
    number: int
    form: str
    first: int
    last: int

    def describe(self) -> str:
        where = f"line {self.first}" if self.first == self.last else f"lines {self.first}-{self.last}"
        return f"{self.number}: {self.form} ({where})"


@dataclass(frozen=True)
class Gate:
    """Delta 2's question, as the copy asks it of the leader."""

    leader: str  # how the leader's count is read (a key of copy_forms.LEADER_COUNTS)
    operator: str
    cap: str
    payload: str | None  # what each rank gathers, when the copy says (copy_forms.PAYLOADS)

    @property
    def question(self) -> str:
        return f"`{self.leader} {self.operator} {self.cap}`"


@dataclass
class Stripped:
    """The copy's ``schedule()`` with the deltas taken out, and what was taken."""

    func: ast.FunctionDef
    deltas: list[FoundDelta] = field(default_factory=list)
    gates: list[Gate] = field(default_factory=list)
    disabled_path: list[ast.stmt] = field(default_factory=list)  # besides the early return
    delta_lines: set[int] = field(default_factory=set)
    restored_lines: set[int] = field(default_factory=set)  # the copy's lines now upstream's statement


def _reads_balance_state(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in _BALANCE_STATE for n in ast.walk(node))


def _copy_method(tree: ast.Module) -> ast.FunctionDef:
    # The copy's class is the one whose schedule() reads balance state.
    found = [f for f in methods_named(tree, None, METHOD) if _reads_balance_state(f)]
    if len(found) != 1:
        raise VerificationFailed(
            f"expected one {METHOD}() that reads balance state in the copy, found {len(found)}: "
            "pass vllm-ascend's patch_balance_schedule.py or a generated module"
        )
    return found[0]


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _leader_compare(node: ast.AST) -> tuple[str, str, str] | None:
    """(leader, operator, compared with) when ``node`` compares a known leader count, else None."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
        return None
    leaders = {ast.dump(astpattern.expression(code)): code for code in copy_forms.LEADER_COUNTS}
    leader = leaders.get(ast.dump(node.left))
    symbol = capcheck.SYMBOLS.get(type(node.ops[0]))
    if leader is None or symbol is None:
        return None
    return leader, symbol, ast.unparse(node.comparators[0])


def _nested_blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    blocks = [
        getattr(stmt, name) for name in ("body", "orelse", "finalbody") if isinstance(getattr(stmt, name, None), list)
    ]
    blocks += [h.body for h in getattr(stmt, "handlers", [])]
    blocks += [c.body for c in getattr(stmt, "cases", [])]
    return [b for b in blocks if b and isinstance(b[0], ast.stmt)]


def strip(func: ast.FunctionDef) -> Stripped:
    """Take the deltas out of ``func`` (in place), in the forms ``copy_forms.FORMS`` declares."""
    out = Stripped(func)
    # Only the method's own first statement (after a docstring) can be the early return.
    first = func.body[1 if func.body and _is_docstring(func.body[0]) else 0] if func.body else None

    def visit(block: list[ast.stmt], top: bool) -> None:
        i = 0
        while i < len(block):
            hit = _match_form(block, i, top and block[i] is first)
            if hit is None:
                for nested in _nested_blocks(block[i]):
                    visit(nested, False)
                i += 1
                continue
            form, captures = hit
            size = len(astpattern.statements(form.code))
            taken = block[i : i + size]
            start, end = taken[0].lineno, max(s.end_lineno or s.lineno for s in taken)
            out.deltas.append(FoundDelta(form.delta, form.name, start, end))
            out.delta_lines |= set(range(start, end + 1))
            if form.delta == 2:
                gate = captures["GATE"]
                assert isinstance(gate, ast.AST)
                read = _leader_compare(gate)
                assert read is not None
                out.gates.append(Gate(*read, payload=None))
            disabled = captures.get("DISABLED_PATH")
            if isinstance(disabled, list) and disabled:
                out.disabled_path.extend(s for s in disabled if isinstance(s, ast.stmt))
            restored = [copying.deepcopy(s) for s in astpattern.statements(form.restores)] if form.restores else []
            for stmt in restored:  # upstream's statement, placed at the delta's lines for messages
                for node in ast.walk(stmt):
                    if hasattr(node, "lineno"):
                        node.lineno, node.end_lineno = start, end  # type: ignore[attr-defined]
                out.restored_lines |= set(range(start, end + 1))
            block[i : i + size] = restored
            i += len(restored)

    visit(func.body, True)
    return out


def _match_form(
    block: list[ast.stmt], index: int, at_top: bool
) -> tuple[copy_forms.Form, dict[str, astpattern.Captured]] | None:
    for form in copy_forms.FORMS:
        if form.first and not at_top:
            continue
        captures = astpattern.match_run(form.code, block, index)
        if captures is None:
            continue
        gate = captures.get("GATE")
        if form.delta == 2 and not (isinstance(gate, ast.AST) and _leader_compare(gate) is not None):
            continue  # `if <test>: break` that is not about the leader: upstream's own, or another edit
        return form, captures
    return None


def payload(tree: ast.Module) -> str | None:
    """What each rank sends in the gather, where the copy says it (``copy_forms.PAYLOADS``)."""
    for method_name, code in copy_forms.PAYLOADS:
        (pattern,) = astpattern.statements(code)
        found = set()
        for method in methods_named(tree, None, method_name):
            for node in ast.walk(method):
                captures: dict[str, astpattern.Captured] = {}
                if isinstance(pattern, ast.Expr):
                    ok = isinstance(node, ast.expr) and astpattern.match(pattern.value, node, captures)
                else:
                    ok = isinstance(node, ast.stmt) and astpattern.match(pattern, node, captures)
                count = captures.get("COUNT")
                if ok and isinstance(count, ast.AST):
                    found.add(ast.unparse(count))
        if len(found) == 1:
            return found.pop()
    return None


@dataclass(frozen=True)
class ExtraEdit:
    where: str  # DISABLED_PATH, or the release the copy was compared with
    edit: provenance.Edit

    def describe(self) -> str:
        if self.where == DISABLED_PATH:
            return f"in {DISABLED_PATH}: {self.edit.describe('upstream')}"
        return self.edit.describe(self.where)


@dataclass(frozen=True)
class CopyReport:
    tag: str  # the vLLM release the copy is paired with
    deltas: tuple[FoundDelta, ...]
    missing: tuple[str, ...]  # deltas not found, and what that means at the tag
    found: provenance.Found
    releases_stale: int | None  # releases from found.tag to tag (negative: the copy is newer)
    cap_known: bool  # both the copy's cap check and upstream's have a shape the generator knows
    cap_differences: tuple[capcheck.Difference, ...]  # the copy's cap check against upstream's at the tag
    gate_differences: tuple[capcheck.Difference, ...]  # the gate's question against upstream's check
    gates: tuple[Gate, ...]
    extra_edits: tuple[ExtraEdit, ...]
    hunks: int  # text hunks that differ from found.tag, deltas taken out
    formatting_only: int

    @property
    def equal(self) -> bool:
        """The copy minus the deltas is upstream's schedule() at the tag."""
        return self.found.exact and self.tag in self.found.tags

    @property
    def replaceable(self) -> bool:
        """The generated module can replace it as is: upstream's body, nothing else edited."""
        return self.equal and not self.extra_edits

    @property
    def verdict(self) -> str:
        if self.equal:
            return "equal"
        if self.found.exact:
            return f"a copy of {self.found.tag}, {self._stale()}"
        stale = f", {self._stale()}" if self.found.tag != self.tag else ""
        n = self.found.differing
        return f"closest {self.found.tag} with {n} differing statement{'s' * (n != 1)}{stale}"

    def _stale(self) -> str:
        n = self.releases_stale
        if n is None:
            return f"not {self.tag}"
        if n >= 0:
            return f"{n} release{'s' * (n != 1)} stale"
        return f"{-n} release{'s' * (n != -1)} newer than {self.tag}"

    def lines(self) -> list[str]:
        out = [f"verdict against vLLM {self.tag}: {self.verdict}"]
        if self.found.exact and len(self.found.tags) > 1:
            out.append(f"schedule() is the same in {', '.join(self.found.tags)}")
        found = "; ".join(d.describe() for d in self.deltas) or "none"
        out.append(f"deltas found: {found}")
        out += [f"delta {m}" for m in self.missing]
        up = f"upstream {self.tag}'s check"
        if not self.cap_known:
            out.append("cap check: the copy's or upstream's has no shape the generator knows: compare them by hand")
        out += [f"cap check: {d.sentence(up, 'the copy', _CAP_EFFECTS)}" for d in self.cap_differences]
        for gate in self.gates:
            sent = (
                f", each rank sends `{gate.payload}`" if gate.payload else ", what each rank sends is not in the copy"
            )
            out.append(f"gate: asks the leader {gate.question}{sent}")
        for d in self.gate_differences:
            copy = "the gathered count" if d.kind in ("lacks", "adds") else "the gate"
            out.append(f"gate: {d.sentence(up, copy, _GATE_EFFECTS)}")
        out.append(f"extra edits: {len(self.extra_edits)}")
        out += [f"  {edit.describe()}" for edit in self.extra_edits]
        s = "s" * (self.hunks != 1)
        out.append(
            f"text: {self.hunks} differing hunk{s} against {self.found.tag}, {self.formatting_only} only in formatting"
        )
        if not self.found.exact or self.tag not in self.found.tags:
            out.append(f"releases scanned: {self.found.scanned}")
        return out


def judge(
    copy_text: str,
    tag: str,
    upstream_text: str,
    releases: Callable[[], Sequence[provenance.Release]] = lambda: (),
) -> CopyReport:
    """Judge ``copy_text`` paired with vLLM ``tag``; ``releases`` (release order) are scanned only when needed."""
    try:
        tree = ast.parse(copy_text)
    except SyntaxError as exc:
        raise VerificationFailed(f"the copy does not parse (line {exc.lineno}): pass a Python module") from None
    stripped = strip(_copy_method(tree))
    gathered = payload(tree)
    gates = tuple(Gate(g.leader, g.operator, g.cap, gathered) for g in stripped.gates)
    mine = provenance.reduce(stripped.func)
    named = provenance.Release(tag, upstream_text)
    scanned: Sequence[provenance.Release] = (named,)
    found = provenance.locate(mine, scanned, tag)
    if not (found.exact and tag in found.tags):
        scanned = _with(releases(), named)
        found = provenance.locate(mine, scanned, tag)
    source = next(r.text for r in scanned if r.tag == found.tag)
    upstream_func = provenance.upstream_function(upstream_text)
    theirs = capcheck.find(upstream_func)
    ours = capcheck.find(stripped.func)
    extra = (
        [ExtraEdit(DISABLED_PATH, provenance.Edit(provenance.statements(stripped.disabled_path, 2), ()))]
        if stripped.disabled_path
        else []
    )
    extra += [ExtraEdit(found.tag, e) for e in found.edits]
    hunks, formatting = _text_hunks(copy_text, stripped, source)
    return CopyReport(
        tag=tag,
        deltas=tuple(stripped.deltas),
        missing=_missing(stripped, upstream_func, tag),
        found=found,
        releases_stale=provenance.releases_between(scanned, found.tag, tag),
        cap_known=theirs is not None and ours is not None,
        cap_differences=_cap_differences(ours, theirs),
        gate_differences=_gate_differences(gates, theirs),
        gates=gates,
        extra_edits=tuple(extra),
        hunks=hunks,
        formatting_only=formatting,
    )


def _with(releases: Sequence[provenance.Release], named: provenance.Release) -> list[provenance.Release]:
    """``releases`` with the named tag in its place (by version), so staleness can be counted."""
    if any(r.tag == named.tag for r in releases):
        return list(releases)
    return sorted([*releases, named], key=lambda r: version_key(version_of(r.tag)))


def _missing(stripped: Stripped, upstream: ast.FunctionDef, tag: str) -> tuple[str, ...]:
    have = {d.number for d in stripped.deltas}
    notes = []
    if 1 not in have:
        notes.append(
            "1 not found: schedule() does not start with `if not self._balance_enabled: return super().schedule(...)`"
        )
    if 2 not in have:
        notes.append("2 not found: no gate asks the leader (in none of the forms copy_forms.py declares)")
    if 3 in have:
        return tuple(notes)
    if not _has(upstream, copy_forms.QUEUE_ASSERT):
        notes.append(f"3 not needed at {tag}: upstream has no `{copy_forms.QUEUE_ASSERT}`")
    elif _has(stripped.func, copy_forms.QUEUE_ASSERT):
        notes.append(f"3 not found: the copy keeps upstream's `{copy_forms.QUEUE_ASSERT}` ({tag} asserts)")
    else:
        notes.append(f"3 not found: {tag} asserts `{copy_forms.QUEUE_ASSERT}`, the copy has neither it nor the break")
    return tuple(notes)


def _has(func: ast.FunctionDef, code: str) -> bool:
    (wanted,) = astpattern.statements(code)
    shape = ast.dump(wanted)
    return any(isinstance(n, type(wanted)) and ast.dump(n) == shape for n in ast.walk(func))


def _cap_differences(
    ours: capcheck.CapCheck | None, theirs: capcheck.CapCheck | None
) -> tuple[capcheck.Difference, ...]:
    """The copy's own cap check (this rank's stop) against upstream's at the tag."""
    if theirs is None or ours is None:
        return ()
    return tuple(capcheck.differences(theirs, ours.count, ours.operator, ours.cap))


def _gate_differences(gates: Sequence[Gate], theirs: capcheck.CapCheck | None) -> tuple[capcheck.Difference, ...]:
    """The gate's question (delta 2) against upstream's cap check at the tag: it must be the same one."""
    if theirs is None:
        return ()
    return tuple(d for g in gates for d in capcheck.differences(theirs, g.payload, g.operator, g.cap))


# What a difference means, by kind (``operator`` keyed by upstream's and the copy's operator).
_CAP_EFFECTS = {
    "lacks": "this rank admits while {what} fill the cap",
    ">= ==": "a count past the cap no longer stops it",
}
_GATE_EFFECTS = {
    "lacks": "a leader whose {what} fill the cap freezes no one",
    ">= ==": "a leader past the cap freezes no one",
}


_CLOSING_COMMA = re.compile(r",(?=[)\]}])")


def _formatting_only(copy: list[str], upstream: list[str]) -> bool:
    def squash(lines: list[str]) -> str:
        text = re.sub(r"\s+", "", "".join(lines))
        return _CLOSING_COMMA.sub("", text)

    a, b = squash(copy), squash(upstream)
    return a == b or a.replace("(", "").replace(")", "") == b.replace("(", "").replace(")", "")


def _method_lines(text: str, func: ast.FunctionDef, skip: set[int]) -> list[str]:
    lines = text.splitlines()
    return [lines[n - 1] for n in range(func.lineno, (func.end_lineno or func.lineno) + 1) if n not in skip]


def _text_hunks(copy_text: str, stripped: Stripped, upstream_text: str) -> tuple[int, int]:
    """Text hunks against the release, deltas taken out; and how many differ only in formatting."""
    upstream = provenance.upstream_function(upstream_text)
    skip = stripped.delta_lines
    mine = _method_lines(copy_text, stripped.func, skip)
    # Delta 3's counterpart upstream (its assert) is no text difference either.
    asserts: set[int] = set()
    if stripped.restored_lines:
        (wanted,) = astpattern.statements(copy_forms.QUEUE_ASSERT)
        asserts = {
            n.lineno for n in ast.walk(upstream) if isinstance(n, ast.Assert) and ast.dump(n) == ast.dump(wanted)
        }
    theirs = _method_lines(upstream_text, upstream, asserts)
    ops = difflib.SequenceMatcher(None, mine, theirs, autojunk=False).get_opcodes()
    hunks = [op for op in ops if op[0] != "equal"]
    formatting = sum(_formatting_only(mine[i1:i2], theirs[j1:j2]) for _, i1, i2, j1, j2 in hunks)
    return len(hunks), formatting

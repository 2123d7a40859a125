"""The edits ``follow`` writes into a file, each keyed by the original libcst node it changes, and the one
pass that writes them: a parameter list, a call's keywords, a dict's keys, a name, a statement added or
dropped after another, a function gated whole under ``--span``. Items are laid out as their neighbours are
(one line, or one per line), so every other byte of the file stays."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from generator.tree.adapt.span import Span

TIGHT = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


@dataclass
class Edits:
    """Every edit of the file, keyed by the original node it replaces (one libcst pass writes them)."""

    params: dict[int, cst.Parameters] = field(default_factory=dict)
    calls: dict[int, list[Callable[[cst.Call], cst.Call]]] = field(default_factory=dict)
    dicts: dict[int, list[Callable[[cst.Dict], cst.Dict]]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    strings: dict[int, str] = field(default_factory=dict)  # a ``d["k"]`` key's string, renamed
    after: dict[int, list[cst.BaseStatement]] = field(default_factory=dict)
    drop: set[int] = field(default_factory=set)
    gated: set[int] = field(default_factory=set)


def _between(seq: Sequence[cst.Param | cst.Arg | cst.DictElement | cst.BaseElement]) -> cst.Comma:
    """The comma the sequence writes between two of its items (its layout: one line, or one per line)."""
    for item in seq[:-1]:
        comma = getattr(item, "comma", None)
        if isinstance(comma, cst.Comma):
            return comma
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def inserted(seq: list[Any], at: int, new: Any) -> list[Any]:
    """``seq`` with ``new`` at ``at``, laid out as its neighbours are: the one before it keeps a comma between,
    ``new`` takes the comma (or none) the one before had, when it goes last."""
    seq = list(seq)
    between = _between(seq)
    if at >= len(seq):
        if seq:
            last = seq[-1]
            new = new.with_changes(comma=last.comma)
            seq[-1] = last.with_changes(comma=between)
        seq.append(new)
        return seq
    seq.insert(at, new.with_changes(comma=between))
    return seq


def removed(seq: list[Any], at: int) -> list[Any]:
    seq = list(seq)
    gone = seq.pop(at)
    if at == len(seq) and seq:  # it was last: the one now last takes its comma (a trailing one, or none)
        seq[-1] = seq[-1].with_changes(comma=gone.comma)
    return seq


def renamed_param(ps: cst.Parameters, old: str, new: str) -> cst.Parameters:
    def rename(part: Sequence[cst.Param]) -> list[cst.Param]:
        return [q.with_changes(name=cst.Name(new)) if q.name.value == old else q for q in part]

    return ps.with_changes(
        posonly_params=rename(ps.posonly_params), params=rename(ps.params), kwonly_params=rename(ps.kwonly_params)
    )


def add_keyword(name: str, at_default: str) -> Callable[[cst.Call], cst.Call]:
    """The call passes ``name`` on only when it is not B's default (``at_default``: the test true at it), spread
    last: ``**({} if p is None else {"p": p})``. A call with the default is the call it was."""

    def edit(call: cst.Call) -> cst.Call:
        args = list(call.args)
        if name in {a.keyword.value for a in args if a.keyword is not None}:
            return call
        value = cst.parse_expression(f'({{}} if {at_default} else {{"{name}": {name}}})')
        return call.with_changes(args=inserted(args, len(args), cst.Arg(value, star="**")))

    return edit


def rename_keyword(old: str, new: str) -> Callable[[cst.Call], cst.Call]:
    def edit(call: cst.Call) -> cst.Call:
        args = [
            a.with_changes(keyword=cst.Name(new)) if a.keyword is not None and a.keyword.value == old else a
            for a in call.args
        ]
        return call.with_changes(args=args)

    return edit


def drop_keyword(name: str) -> Callable[[cst.Call], cst.Call]:
    def edit(call: cst.Call) -> cst.Call:
        args = list(call.args)
        at = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == name), None)
        return call if at is None else call.with_changes(args=removed(args, at))

    return edit


def _quote(d: cst.Dict) -> str:
    first = next((e.key for e in d.elements if isinstance(e, cst.DictElement)), None)
    return "'" if isinstance(first, cst.SimpleString) and first.value.startswith("'") else '"'


def rename_key(old: str, new: str) -> Callable[[cst.Dict], cst.Dict]:
    def edit(d: cst.Dict) -> cst.Dict:
        q = _quote(d)
        elements = [e.with_changes(key=cst.SimpleString(f"{q}{new}{q}")) if _keyed(e, old) else e for e in d.elements]
        return d.with_changes(elements=elements)

    return edit


def drop_key(name: str) -> Callable[[cst.Dict], cst.Dict]:
    def edit(d: cst.Dict) -> cst.Dict:
        elements = list(d.elements)
        at = next((i for i, e in enumerate(elements) if _keyed(e, name)), None)
        return d if at is None else d.with_changes(elements=removed(elements, at))

    return edit


def _keyed(element: cst.BaseDictElement, name: str) -> bool:
    return (
        isinstance(element, cst.DictElement)
        and isinstance(element.key, cst.SimpleString)
        and element.key.evaluated_value == name
    )


class Writer(cst.CSTTransformer):
    """Writes ``Edits`` in one pass; under a span, each function written is gated whole."""

    def __init__(self, edits: Edits, span: Span | None) -> None:
        self.edits, self.span = edits, span

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        new = self.edits.names.get(id(original_node))
        return updated_node.with_changes(value=new) if new is not None else updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        for edit in self.edits.calls.get(id(original_node), []):
            updated_node = edit(updated_node)
        return updated_node

    def leave_Dict(self, original_node: cst.Dict, updated_node: cst.Dict) -> cst.Dict:
        for edit in self.edits.dicts.get(id(original_node), []):
            updated_node = edit(updated_node)
        return updated_node

    def leave_Parameters(self, original_node: cst.Parameters, updated_node: cst.Parameters) -> cst.Parameters:
        return self.edits.params.get(id(original_node), updated_node)

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString) -> cst.SimpleString:
        new = self.edits.strings.get(id(original_node))
        return updated_node.with_changes(value=new) if new is not None else updated_node

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        body: list[cst.BaseStatement] = []
        for before, after in zip(original_node.body, updated_node.body, strict=True):
            if id(before) in self.edits.drop:
                continue
            body.append(after)
            body += self.edits.after.get(id(before), [])
        return updated_node.with_changes(body=body or [cst.SimpleStatementLine([cst.Pass()])])

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef | cst.If:
        if id(original_node) not in self.edits.gated or self.span is None:
            return updated_node
        a = original_node.with_changes(leading_lines=[])
        b = updated_node.with_changes(leading_lines=[])
        first, second = (a, b) if self.span.ordered("a", "b")[0] == "a" else (b, a)
        return cst.If(
            test=cst.parse_expression(self.span.test),
            body=cst.IndentedBlock([first]),
            orelse=cst.Else(body=cst.IndentedBlock([second])),
            leading_lines=original_node.leading_lines,
        )

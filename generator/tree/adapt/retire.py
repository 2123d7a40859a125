"""Dead version gates retired from one file's text: the branch no release the tree runs on takes goes, the live
one stays in its place, with its comments.

A gate is a call of the tree's own gate helper with a release (``vllm_version_is("0.28.0")``, ``gates``). It is
dead when its value is the same at every release from ``floor`` on (the oldest the tree runs on after this
run: B for a plain ``adapt``, A with ``--span``): ``is`` a release older than the floor is always false, ``at
least`` one no newer than it always true. A gate naming the floor, a newer release or no release is live.

What a dead gate's test folds to decides, as Python would: an ``if`` (with its ``elif``s and ``else``) keeps
the one branch taken, dedented in its place (a block left empty gets ``pass``); ``a if gate else b`` keeps
``a`` or ``b``; ``not``, ``and`` and ``or`` fold with the constant; ``@pytest.mark.skipif(gate, ...)`` goes
when the gate is false (a test always skipped is reported, not unskipped). Any other use of a dead gate
(``use_legacy = vllm_version_is("0.28.0")``) becomes the constant and is reported: what follows from it is a
person's call. A gate whose release is not a string constant cannot be decided and is reported. The
helper's import goes where nothing else in the file uses it. Every other byte of the file stays (libcst).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from generator.judge.census import newer_syntax
from generator.judge.gates import dead_value


@dataclass
class Retired:
    """What retiring did to one file: gates retired and kept, uses made constant, what could not be decided."""

    retired: list[int] = field(default_factory=list)  # lines of the gates retired
    live: list[int] = field(default_factory=list)  # lines of gates kept: they name the floor or a newer release
    constant: list[tuple[int, str]] = field(default_factory=list)  # an expression use made a constant
    undecided: list[tuple[int, str]] = field(default_factory=list)  # (line, why)
    skipped_always: list[int] = field(default_factory=list)  # a skipif whose gate is always true


class _Retire(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, helpers: Mapping[str, str], floor: str) -> None:
        super().__init__()
        self.helpers = helpers  # a name the file calls the helper by -> how it compares
        self.floor = floor
        self.done = Retired()
        self.folded: set[int] = set()  # ids of the constants this run put where a dead gate was
        self.made: list[cst.Name] = []  # ...held, so no other node is ever given one of those ids
        self.elifs: set[int] = set()
        self.in_test = 0

    def _line(self, node: cst.CSTNode) -> int:
        return int(self.get_metadata(PositionProvider, node).start.line)

    # --- a gate's call, and what it folds to

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
        op = self.helpers.get(name)
        if op is None:
            return updated
        line = self._line(original)
        arg = updated.args[0].value if len(updated.args) == 1 and not updated.args[0].keyword else None
        release = arg.evaluated_value if isinstance(arg, cst.SimpleString) else None
        if not isinstance(release, str):
            self.done.undecided.append(
                (line, f"{cst.Module([]).code_for_node(updated)}: its release is not a constant")
            )
            return updated
        value = dead_value(op, release, self.floor)
        if value is None:
            self.done.live.append(line)
            return updated
        self.done.retired.append(line)
        constant = cst.Name("True" if value else "False")
        self.folded.add(id(constant))
        self.made.append(constant)
        return constant

    def _value(self, expr: cst.BaseExpression) -> bool | cst.BaseExpression:
        """``expr`` folded where this run put a constant: True, False, or the expression (simplified)."""
        if isinstance(expr, cst.Name) and id(expr) in self.folded:
            return expr.value == "True"
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            inner = self._value(expr.expression)
            return (not inner) if isinstance(inner, bool) else expr.with_changes(expression=inner)
        if isinstance(expr, cst.BooleanOperation):
            left, right = self._value(expr.left), self._value(expr.right)
            stop = isinstance(expr.operator, cst.Or)  # True ends an ``or``, False an ``and``
            if left is stop or right is stop:
                return stop
            if isinstance(left, bool):
                return _in_parens_of(expr, right)
            if isinstance(right, bool):
                return _in_parens_of(expr, left)
            return expr.with_changes(left=left, right=right)
        return expr

    def _folded_test(self, test: cst.BaseExpression) -> bool | cst.BaseExpression:
        return self._value(test)

    # --- statements and expressions that hold a test

    def visit_If(self, node: cst.If) -> bool:
        if isinstance(node.orelse, cst.If):
            self.elifs.add(id(node.orelse))
        return True

    def leave_If(
        self, original: cst.If, updated: cst.If
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement] | cst.RemovalSentinel:
        if id(original) in self.elifs:
            return updated  # its chain is folded whole from its first ``if``
        branches: list[tuple[cst.BaseExpression, cst.BaseSuite]] = []
        last: cst.BaseSuite | None = None
        node: cst.If | cst.Else | None = updated
        changed = False
        above: list[cst.EmptyLine] = []
        while isinstance(node, cst.If):
            value = self._folded_test(node.test)
            if value is True:
                last, changed = node.body, True
                break
            if value is False:
                changed = True
            else:
                changed = changed or value is not node.test
                branches.append((value, node.body))
            node = node.orelse
        else:
            last = node.body if isinstance(node, cst.Else) else None
            above = list(node.leading_lines) if isinstance(node, cst.Else) else []
        if not changed:
            return updated
        if not branches:
            return self._in_place(updated, last, above)
        chain: cst.If | cst.Else | None = cst.Else(body=last) if last is not None else None
        for test, body in reversed(branches):
            chain = cst.If(test=test, body=body, orelse=chain)
        assert isinstance(chain, cst.If)
        return chain.with_changes(leading_lines=updated.leading_lines)

    def _in_place(
        self, original: cst.If, body: cst.BaseSuite | None, above: list[cst.EmptyLine]
    ) -> cst.FlattenSentinel[cst.BaseStatement] | cst.RemovalSentinel:
        """The statements of the branch taken, where the ``if`` was: its comments above the first, and those
        above its ``else:`` when the ``else`` is what stays."""
        if body is None:
            return cst.RemovalSentinel.REMOVE
        if isinstance(body, cst.IndentedBlock):
            statements: list[cst.BaseStatement] = list(body.body)
        else:
            assert isinstance(body, cst.SimpleStatementSuite)
            statements = [cst.SimpleStatementLine(body.body)]
        if not statements:
            return cst.RemovalSentinel.REMOVE
        first = statements[0]
        own = getattr(first, "leading_lines", ())
        statements[0] = first.with_changes(leading_lines=[*original.leading_lines, *above, *own])
        return cst.FlattenSentinel(statements)

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        if updated.body:
            return updated
        return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])

    def leave_IfExp(self, original: cst.IfExp, updated: cst.IfExp) -> cst.BaseExpression:
        value = self._folded_test(updated.test)
        if value is True:
            return updated.body.with_changes(lpar=updated.lpar, rpar=updated.rpar) if updated.lpar else updated.body
        if value is False:
            return updated.orelse.with_changes(lpar=updated.lpar, rpar=updated.rpar) if updated.lpar else updated.orelse
        return updated.with_changes(test=value) if value is not updated.test else updated

    def leave_Decorator(self, original: cst.Decorator, updated: cst.Decorator) -> cst.Decorator | cst.RemovalSentinel:
        call = updated.decorator
        if not (isinstance(call, cst.Call) and call.args and _named(call.func).endswith("skipif")):
            return updated
        value = self._folded_test(call.args[0].value)
        if value is False:
            return cst.RemovalSentinel.REMOVE
        if value is True:
            self.done.skipped_always.append(self._line(original))
            return updated
        if value is not call.args[0].value:
            first = call.args[0].with_changes(value=value)
            return updated.with_changes(decorator=call.with_changes(args=[first, *call.args[1:]]))
        return updated

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        """A dead gate left as a constant outside any test (an assignment, an argument): reported."""
        for node in _constants(updated, self.folded):
            self.done.constant.append(
                (self._line(original), f"now {node.value}: what follows from it is a person's call")
            )
        return updated


def _named(func: cst.BaseExpression) -> str:
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return f"{_named(func.value)}.{func.attr.value}"
    return ""


def _constants(node: cst.CSTNode, folded: set[int]) -> list[cst.Name]:
    found: list[cst.Name] = []

    class _Find(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> bool:
            if id(name) in folded:
                found.append(name)
            return False

    node.visit(_Find())
    return found


def _in_parens_of(expr: cst.BaseExpression, kept: bool | cst.BaseExpression) -> bool | cst.BaseExpression:
    """What stays of ``expr`` keeps its parentheses: a test written over several lines inside them
    (``elif (\n a\n and b\n):``) is only Python with them."""
    if isinstance(kept, bool) or not expr.lpar or kept.lpar:
        return kept
    return kept.with_changes(lpar=expr.lpar, rpar=expr.rpar)


def retire(text: str, helpers: Mapping[str, str], floor: str) -> tuple[str, Retired]:
    """``text`` with the gates dead from ``floor`` on retired, and what was done. ``helpers``: the dotted paths
    of the tree's gate helpers and how each compares; a file calling none of them is returned as it was."""
    names = _names_bound(text, helpers)
    if not names:
        return text, Retired()
    calls = _gate_calls(text, names)
    if all(release is not None and dead_value(names[name], release, floor) is None for name, release, _ in calls):
        return text, Retired(live=[line for _, _, line in calls])  # nothing dead: no rewrite (libcst costs)
    wrapper = MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True)  # parsed here: no one else holds it
    retiring = _Retire(names, floor)
    module = wrapper.visit(retiring)
    if retiring.done.retired:
        module = _drop_unused_import(module, names)
    newer_syntax.parse(module.code, "<retired>")  # libcst writes only code it parsed: a failure is a defect
    return module.code, retiring.done


def _gate_calls(text: str, names: Mapping[str, str]) -> list[tuple[str, str | None, int]]:
    """Each call of a gate helper in the file: (the name called, its release when a constant, its line)."""
    out: list[tuple[str, str | None, int]] = []
    for node in ast.walk(newer_syntax.parse(text, "<tree>")[0]):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name not in names:
            continue
        arg = node.args[0] if len(node.args) == 1 and not node.keywords else None
        release = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
        out.append((name, release, node.lineno))
    return out


def _names_bound(text: str, helpers: Mapping[str, str]) -> dict[str, str]:
    """The names the file calls each helper by: what it imports of the helper's module, or, in the helper's own
    module, its own name."""
    if not any(path.rpartition(".")[2] in text for path in helpers):
        return {}
    try:
        tree = newer_syntax.parse(text, "<tree>")[0]
    except SyntaxError:
        return {}
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if (op := helpers.get(f"{node.module}.{alias.name}")) is not None:
                    out[alias.asname or alias.name] = op
        elif isinstance(node, ast.FunctionDef) and any(p.rpartition(".")[2] == node.name for p in helpers):
            own = [op for p, op in helpers.items() if p.rpartition(".")[2] == node.name]
            out.setdefault(node.name, own[0])
    return out


def _drop_unused_import(module: cst.Module, names: Mapping[str, str]) -> cst.Module:
    """The helper's ``from`` import without the names the file no longer calls (the statement, when it is all)."""
    used = {n for n in names if _uses(module, n) > 0}
    gone = set(names) - used

    class _Drop(cst.CSTTransformer):
        def leave_ImportFrom(
            self, original: cst.ImportFrom, updated: cst.ImportFrom
        ) -> cst.ImportFrom | cst.RemovalSentinel:
            if isinstance(updated.names, cst.ImportStar):
                return updated
            kept = [a for a in updated.names if (a.asname.name.value if a.asname else _named(a.name)) not in gone]  # type: ignore[union-attr]
            if len(kept) == len(updated.names):
                return updated
            if not kept:
                return cst.RemovalSentinel.REMOVE
            # the last kept takes the comma the statement's last name had: a trailing one where the names
            # stand one per line in parentheses (their closing line stays as it was), none on one line
            kept[-1] = kept[-1].with_changes(comma=updated.names[-1].comma)
            return updated.with_changes(names=kept)

        def leave_SimpleStatementLine(
            self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
        ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
            return cst.RemovalSentinel.REMOVE if not updated.body else updated

    return module.visit(_Drop()) if gone else module


def _uses(module: cst.Module, name: str) -> int:
    """How many times ``name`` is read in the module, imports aside."""
    count = 0

    class _Count(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> bool:
            return False

        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            return False

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return True

        def visit_Name(self, node: cst.Name) -> bool:
            nonlocal count
            count += node.value == name
            return False

    module.visit(_Count())
    return count

"""Moved vLLM names rewritten in one file's text: imports, attribute paths and string targets.

``moves`` maps the dotted path the tree uses at A (``vllm.a.Name``) to where B defines that
definition (module, qualified name). Only these are touched, with libcst, so every other byte of
the file (comments, layout, the aliases it gives) stays:

- ``from vllm.a import Name as N`` becomes ``from vllm.b import Name as N`` (the alias kept; a
  statement that also imports names that did not move is split: the moved ones get their own
  statement, right after it, in the order they were written);
- ``vllm.a.Name`` in code becomes ``vllm.b.Name``, and ``import vllm.b`` is added after the file's
  ``import vllm.a`` when the file does not import it already;
- a string argument of a call (``mock.patch("vllm.a.Name.method")``) has its path rewritten;
- a module that moved whole (its qualified name is ""): ``import vllm.a.mod as m`` becomes
  ``import vllm.b.mod as m``, ``from vllm.a import mod as m`` becomes ``from vllm.b import mod as m``.

A name that B defines inside a class (``Outer.Name``) cannot be imported with ``from``: such an
import is left and reported, as is every name gone with no successor (the caller's list). So is an
import in one branch of an ``if`` or ``try`` whose other branch imports the same name from B's module
already: a guard by vLLM version keeps A's path for A on purpose (dropping the guard is the person's call).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from generator.judge.census import newer_syntax
from generator.tree.adapt import span as spanned
from generator.tree.adapt.span import Span

# The dotted path at A -> (B's module, B's qualified name in it).
Moves = Mapping[str, tuple[str, str]]


@dataclass(frozen=True)
class Rewrite:
    line: int
    kind: str  # import | attribute | string
    old: str
    new: str


@dataclass(frozen=True)
class Left:
    line: int
    name: str
    why: str
    kind: str = "name"  # name (a person must move it) | guarded (kept on purpose for A: no edit needed at B)


def _dotted(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr.value}"
    return None


def _expr(dotted: str) -> cst.BaseExpression:
    return cst.parse_expression(dotted)


def _target(path: str, moves: Moves) -> tuple[str, str] | None:
    """``path`` itself moved, or a prefix of it did: the new dotted path and the new module."""
    parts = path.split(".")
    for cut in range(len(parts), 1, -1):
        found = moves.get(".".join(parts[:cut]))
        if found is not None:
            module, qualname = found
            return ".".join([module, *([qualname] if qualname else []), *parts[cut:]]), module
    return None


def _imports(node: cst.CSTNode) -> list[cst.ImportFrom | cst.Import]:
    """Every ``import`` and absolute ``from`` import of named members anywhere under ``node``."""
    found: list[cst.ImportFrom | cst.Import] = []

    class _Collect(cst.CSTVisitor):
        def visit_ImportFrom(self, imp: cst.ImportFrom) -> bool:
            if imp.module is not None and not imp.relative and not isinstance(imp.names, cst.ImportStar):
                found.append(imp)
            return False

        def visit_Import(self, imp: cst.Import) -> bool:
            found.append(imp)
            return False

    node.visit(_Collect())
    return found


def _bound(imp: cst.ImportFrom | cst.Import) -> set[str]:
    """The dotted paths an import statement names: ``vllm.a.Name`` for a ``from`` import, the module for ``import``."""
    if isinstance(imp, cst.Import):
        return {_dotted(a.name) or "" for a in imp.names}
    module = _dotted(imp.module) if imp.module is not None else None
    names = imp.names if not isinstance(imp.names, cst.ImportStar) else ()
    return {f"{module}.{_dotted(a.name)}" for a in names}


class _Guards(cst.CSTVisitor):
    """For each import inside a branch of an ``if``/``try``: what the other branches import."""

    def __init__(self) -> None:
        super().__init__()
        self.siblings: dict[int, set[str]] = {}

    def _branches(self, branches: Sequence[cst.CSTNode]) -> None:
        imports = [_imports(b) for b in branches]
        bound = [set().union(*map(_bound, found)) for found in imports]
        for i, found in enumerate(imports):
            others = set().union(*(bound[:i] + bound[i + 1 :]))
            for imp in found if others else ():
                self.siblings.setdefault(id(imp), set()).update(others)

    def visit_If(self, node: cst.If) -> bool:
        self._branches([node.body] if node.orelse is None else [node.body, node.orelse])
        return True

    def visit_Try(self, node: cst.Try) -> bool:
        self._branches([node.body, *(h.body for h in node.handlers)])
        return True


class _Rewriter(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, moves: Moves, guarded: Mapping[int, set[str]], span: Span | None = None) -> None:
        super().__init__()
        self.moves = moves
        self.span = span  # write A's form and B's behind the tree's gate (span.py), not B's alone
        self.spanned: set[int] = set()  # import statements rewritten, by the id of the statement as read
        self.guarded = guarded  # an import's id -> what the other branches of its if/try import
        self.rewrites: list[Rewrite] = []
        self.left: list[Left] = []
        self.imported: set[str] = set()  # modules the file imports with ``import``
        self.needed: dict[str, str] = {}  # module an attribute path now needs -> the module it replaced
        self._in_import = 0
        self._call_args = 0
        self._assigned = 0

    def _line(self, node: cst.CSTNode) -> int:
        return int(self.get_metadata(PositionProvider, node).start.line)

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            name = _dotted(alias.name)
            if name:
                self.imported.add(name)
        self._in_import += 1
        return True

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        """``import vllm.a.mod [as m]`` of a module that moved whole becomes ``import vllm.b.mod [as m]``."""
        self._in_import -= 1
        names: list[cst.ImportAlias] = []
        for alias in updated.names:
            name = _dotted(alias.name) or ""
            target = self.moves.get(name)
            if target is None or target[1]:  # only a module that moved whole is imported so
                names.append(alias)
                continue
            module = target[0]
            if module in self.guarded.get(id(original), ()):
                why = f"a guard: another branch of this if/try imports {module} already"
                self.left.append(Left(self._line(original), name, why, "guarded"))
                names.append(alias)
                continue
            self.rewrites.append(Rewrite(self._line(original), "import", name, module))
            self.imported.add(module)
            self.spanned.add(id(original))
            names.append(alias.with_changes(name=_expr(module)))
        return updated.with_changes(names=names)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False  # rewritten whole in leave_ImportFrom; its names are not attribute paths

    def leave_ImportFrom(
        self, original: cst.ImportFrom, updated: cst.ImportFrom
    ) -> cst.ImportFrom | cst.FlattenSentinel[cst.BaseSmallStatement]:
        module = _dotted(updated.module) if updated.module is not None and not updated.relative else None
        if module is None or isinstance(updated.names, cst.ImportStar):
            return updated
        line = self._line(original)
        kept: list[cst.ImportAlias] = []
        moved: dict[str, list[cst.ImportAlias]] = {}
        for alias in updated.names:
            name = _dotted(alias.name) or ""
            target = self.moves.get(f"{module}.{name}")
            if target is None:
                kept.append(alias)
                continue
            new_module, qualname = target
            if not qualname:  # a module that moved whole, imported from its package: from its new package
                new_module, _, qualname = new_module.rpartition(".")
            if f"{new_module}.{qualname}" in self.guarded.get(id(original), ()):
                why = f"a guard: another branch of this if/try imports it from {new_module} already"
                self.left.append(Left(line, f"{module}.{name}", why, "guarded"))
                kept.append(alias)
                continue
            if "." in qualname:
                self.left.append(
                    Left(line, f"{module}.{name}", f"B defines it inside a class: {new_module}.{qualname}")
                )
                kept.append(alias)
                continue
            renamed = alias.with_changes(name=cst.Name(qualname), comma=cst.MaybeSentinel.DEFAULT)
            moved.setdefault(new_module, []).append(renamed)
            self.rewrites.append(Rewrite(line, "import", f"{module}.{name}", f"{new_module}.{qualname}"))
        if not moved:
            return updated
        self.spanned.add(id(original))
        if not kept and len(moved) == 1:
            ((new_module, aliases),) = moved.items()
            return updated.with_changes(module=_expr(new_module), names=_with_commas(updated.names, aliases))
        statements: list[cst.BaseSmallStatement] = []
        if kept:
            statements.append(updated.with_changes(names=_with_commas(updated.names, kept)))
        for new_module, aliases in moved.items():
            statements.append(
                cst.ImportFrom(module=_expr(new_module), names=[*_commas(aliases)])  # type: ignore[arg-type]
            )
        return cst.FlattenSentinel(statements)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if self._in_import:
            return updated
        path = _dotted(original)
        if path is None or not path.startswith("vllm."):
            return updated
        # libcst leaves a chain inside out: ``vllm.a.Name`` is rewritten where it is whole, and the
        # chain around it (``.method``) is kept as updated.
        target = _target(path, self.moves) if path in self.moves else None
        if target is None:
            return updated
        new_path, new_module = target
        if self._assigned and self.moves[path][1] and self._through_moved_module(path):
            return updated  # ``old.mod.X = ...`` with ``old.mod`` moved whole: its rewrite, inside, is this one's
        if self._assigned and self.moves[path][1]:
            # A monkeypatch: the old module's callers may still look the name up there (``from`` imports),
            # so where the patch must go at B is a person's call, not a rename. (Through a module that moved
            # whole, ``old.mod.X = ...`` is ``new.mod.X = ...``: X went with it, and is rewritten.)
            self.left.append(Left(self._line(original), path, f"a patch assigns it; B defines it as {new_path}"))
            return updated
        if self.span is not None and self.span.helper is None:
            why = f"under --span with no gate helper: B defines it as {new_path}, A's path kept"
            self.left.append(Left(self._line(original), path, why))
            return updated
        self.rewrites.append(Rewrite(self._line(original), "attribute", path, new_path))
        self.needed.setdefault(new_module, path)
        if self.span is not None:
            return spanned.expression(self.span, path, new_path)
        return _expr(new_path)

    def _through_moved_module(self, path: str) -> bool:
        """A proper prefix of ``path`` is a module that moved whole (its members went with it)."""
        parts = path.split(".")
        return any(self.moves.get(".".join(parts[:cut]), ("", "x"))[1] == "" for cut in range(2, len(parts)))

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        """A split import gets a line per statement: the first keeps the line's comment and the lines above.
        Under ``--span``, an import statement rewritten becomes A's line and B's lines behind the gate."""
        lines: list[cst.SimpleStatementLine] = [updated]
        if len(original.body) == 1 and len(updated.body) > 1:
            first, *rest = updated.body
            lines = [
                updated.with_changes(body=[first.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]),
                *(cst.SimpleStatementLine([s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]) for s in rest),
            ]
        if self.span is None or not any(id(s) in self.spanned for s in original.body):
            return lines[0] if len(lines) == 1 else cst.FlattenSentinel(lines)
        if len(original.body) != 1:  # ``import a; import b`` on one line: not written behind a gate
            for stmt in original.body:
                self.spanned.discard(id(stmt))
            self.left.append(Left(self._line(original), "", "under --span: several statements on one line"))
            return original
        return spanned.statements(self.span, original, lines)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        self._assigned += 1
        return True

    def leave_AssignTarget(self, original: cst.AssignTarget, updated: cst.AssignTarget) -> cst.AssignTarget:
        self._assigned -= 1
        return updated

    def visit_Arg(self, node: cst.Arg) -> bool:
        self._call_args += 1
        return True

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        self._call_args -= 1
        return updated

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        if not self._call_args:
            return updated
        value = original.evaluated_value
        if not isinstance(value, str) or not value.startswith("vllm.") or original.prefix.lower() not in ("", "u"):
            return updated
        target = _target(value, self.moves)
        if target is None:
            return updated
        quote = original.quote
        if quote in value or "\\" in target[0]:
            return updated
        new = updated.with_changes(value=f"{original.prefix}{quote}{target[0]}{quote}")
        if self.span is not None and self.span.helper is None:
            why = f"under --span with no gate helper: B's target is {target[0]}, A's kept"
            self.left.append(Left(self._line(original), value, why))
            return updated
        self.rewrites.append(Rewrite(self._line(original), "string", value, target[0]))
        if self.span is not None:  # the string's own quotes and prefix, both forms
            a_form, b_form = cst.Module([]).code_for_node(original), cst.Module([]).code_for_node(new)
            return spanned.expression(self.span, a_form, b_form)  # type: ignore[return-value]
        return new


def _commas(aliases: Sequence[cst.ImportAlias]) -> list[cst.ImportAlias]:
    last = len(aliases) - 1
    return [
        a.with_changes(
            comma=cst.MaybeSentinel.DEFAULT if i == last else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        )
        for i, a in enumerate(aliases)
    ]


def _with_commas(original: Sequence[cst.ImportAlias], aliases: Sequence[cst.ImportAlias]) -> list[cst.ImportAlias]:
    """The aliases with the original statement's comma style (a parenthesized list keeps its trailing comma)."""
    if len(aliases) == len(original):
        return [a.with_changes(comma=o.comma) for a, o in zip(aliases, original, strict=True)]
    return _commas(aliases)


class _AddImports(cst.CSTTransformer):
    """``import vllm.b`` after the first statement importing ``vllm.a`` it replaces (under ``--span``, run at B
    alone: A may have no such module)."""

    def __init__(self, needed: Mapping[str, str], imported: set[str], span: Span | None = None) -> None:
        super().__init__()
        self.wanted = {m: old for m, old in needed.items() if m not in imported}
        self.span = span

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.FlattenSentinel[cst.BaseStatement]:
        imports = [s for s in updated.body if isinstance(s, cst.Import)]
        names = {_dotted(a.name) for s in imports for a in s.names}
        add = [m for m, old in self.wanted.items() if any(n and old.startswith(n + ".") for n in names)]
        if not add:
            return updated
        for module in add:
            del self.wanted[module]
        lines: list[cst.BaseStatement] = [
            cst.SimpleStatementLine([cst.Import([cst.ImportAlias(_expr(m))])])  # type: ignore[arg-type]
            for m in sorted(add)
        ]
        if self.span is not None:
            lines = [cst.parse_statement(self.span.b_only(f"import {m}")) for m in sorted(add)]
        return cst.FlattenSentinel([updated, *lines])


def rewrite(text: str, moves: Moves, span: Span | None = None) -> tuple[str, list[Rewrite], list[Left]]:
    """``text`` with its moved names rewritten; the rewrites made and the names left, by line.

    A rewrite takes every use with it, or none: a module's import rewritten while a dotted use of the old
    module's path is left (``import vllm.a.mod`` rewritten, ``vllm.a.mod.X`` left) would break the file where
    it worked, so that module is not rewritten at all, and its import is left beside the use.
    """
    new, rewrites, left = _rewrite(text, moves, span)
    stuck = {
        r.old: next(x for x in left if x.kind == "name" and _under(x.name, r.old))
        for r in rewrites
        if r.kind == "import"
        and r.old in moves
        and not moves[r.old][1]  # a module that moved whole: its dotted uses hang on this import
        and any(x.kind == "name" and _under(x.name, r.old) for x in left)
    }
    if not stuck:
        return new, rewrites, left
    new, rewrites, left = _rewrite(text, {k: v for k, v in moves.items() if k not in stuck}, span)
    for module, use in sorted(stuck.items()):
        line = next(
            (r.line for r in _rewrite(text, moves, span)[1] if r.old == module and r.kind == "import"), use.line
        )
        why = f"not rewritten: its use {use.name} at line {use.line} could not be ({use.why})"
        left.append(Left(line, module, why))
    return new, rewrites, left


def _named(key: str, text: str) -> bool:
    """The text names the moved path's module and its last name (each form above writes both)."""
    module, _, name = key.rpartition(".")
    return module in text and name in text


def _under(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def _rewrite(text: str, moves: Moves, span: Span | None = None) -> tuple[str, list[Rewrite], list[Left]]:
    # Every form rewritten names the moved path's module and its last name in the text (``from vllm.a import
    # N``, ``vllm.a.N``, ``"vllm.a.N"``): a file naming none of them is left unparsed (libcst's parse and
    # metadata are most of adapt's time on a large tree).
    if not moves or not any(_named(key, text) for key in moves):
        return text, [], []
    wrapper = MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True)  # parsed here: no one else holds it
    guards = _Guards()
    wrapper.module.visit(guards)  # the wrapper's own copy: the rewriter sees these nodes, by identity
    rewriter = _Rewriter(moves, guards.siblings, span)
    changed = wrapper.visit(rewriter)
    if rewriter.needed:
        changed = changed.visit(_AddImports(rewriter.needed, rewriter.imported, span))
    new = changed.code
    if new != text:
        newer_syntax.parse(new, "<adapted>")  # libcst writes only code it parsed: a failure here is a defect
    rewrites = sorted(set(rewriter.rewrites), key=lambda r: (r.line, r.kind, r.old))
    return new, rewrites, rewriter.left

"""What became of one vLLM name between two releases: unchanged, changed (and what), moved, removed, added.

Definitions are compared as stdlib ``ast`` sees them, so formatting and comments never make a change.
Docstrings do not either: a docstring changes nothing a patch, an override, a copy or an import relies
on, and vLLM rewrites them often enough that counting them would bury the changes that do matter.
What does: a function's signature (arguments, defaults, annotations, decorators, ``async``) or its
body; a class's bases, decorators or members (each named); a value's expression; a module's top-level
names. A name whose defining module (or class) differs between the two releases is *moved*, the new
place named, whether or not the old path still resolves through a re-export: a patch of the old path
no longer reaches what callers of the new one use. A name gone from B is looked for under another
module of B by its own name (and kind); found, it moved; else it is removed.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from generator.judge.census import reading
from generator.judge.couplings.upstream import Definition, NotFound, Resolution, Resolver

UNCHANGED, CHANGED, MOVED, REMOVED, ADDED, UNRESOLVED = (
    "unchanged",
    "changed",
    "moved",
    "removed",
    "added",
    "unresolved",
)
REDUNDANT = "redundant"  # a copy equal to B's function (the copy can go)
STATUSES = (REMOVED, MOVED, CHANGED, ADDED, REDUNDANT, UNRESOLVED, UNCHANGED)  # the order reports use

# A candidate for where a removed name went must be at least this much like it (statements in common).
MOVED_LIKENESS = 0.3
# Or, for a class or a module, at least this much of its members' names in common.
MOVED_BY_MEMBERS = 0.5
# Or, for a function or a class, the same docstring of at least this many characters: a short function that
# moved and changed its one statement shares none, its docstring it keeps (a short one says too little).
MOVED_BY_DOCSTRING = 40
_TOP_LEVEL = re.compile(r"^(?:async[ \t]+def|def|class)[ \t]+(\w+)|^(\w+)[ \t]*(?::[^=\n]*)?=(?!=)", re.M)


@dataclass(frozen=True)
class Change:
    status: str
    parts: tuple[str, ...] = ()  # what changed: signature, body, value, bases, members, kind, defined in
    detail: str = ""  # the members that changed, where it moved, why it is unresolved
    moved_to: str | None = None
    old: Definition | None = None
    new: Definition | None = None
    diff: str = ""  # upstream's own diff of the definition, A to B ("" for modules and unchanged ones)


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` without its docstring (the same list when it has none)."""
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return body[1:]
    return body


def _dump(nodes: Iterable[ast.AST | None]) -> str:
    """The nodes as ``ast`` sees them, the docstrings of every def and class inside them left out.

    Equal exactly when ``ast.dump`` of copies without their docstrings would be (every field, in order),
    without copying: a module's members are compared by thousands, and a deep copy of each cost more than
    all the rest of judging. Each node's text is kept, by identity, for the next comparison that needs it.
    """
    return "|".join(_key(n) if n is not None else "-" for n in nodes)


_DOCUMENTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)
_KEPT = 200_000
_KEYS: dict[int, tuple[ast.AST, str]] = {}  # id -> (the node, kept alive so the id stays its own; its text)


_FIELDS: dict[type, tuple[str, tuple[tuple[str, str], ...]]] = {}  # a node class -> "Name(", its fields and "name="


def _shape(cls: type) -> tuple[str, tuple[tuple[str, str], ...]]:
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = (f"{cls.__name__}(", tuple((n, f"{n}=") for n in getattr(cls, "_fields", ())))
    return found


def _key(node: object) -> str:
    if isinstance(node, list):
        return "[" + ",".join([_key(n) for n in node]) + "]"
    if not isinstance(node, ast.AST):
        return repr(node)
    held = _KEYS.get(id(node))
    if held is not None and held[0] is node:
        return held[1]
    head, names = _shape(type(node))
    fields = []
    for name, label in names:
        try:
            value = getattr(node, name)
        except AttributeError:
            continue  # as ``ast.iter_fields`` leaves it out
        if name == "body" and isinstance(node, _DOCUMENTED):
            value = _without_docstring(value) or [ast.Pass()]
        fields.append(label + _key(value))
    text = head + ",".join(fields) + ")"
    if isinstance(node, (ast.stmt, ast.arguments)):  # statements are what is compared again; expressions are many
        if len(_KEYS) >= _KEPT:  # one run's statements fit; a long-lived process starts again
            _KEYS.clear()
        _KEYS[id(node)] = (node, text)
    return text


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    return f"{type(node).__name__}|{_dump([node.args, node.returns, *node.decorator_list])}"


def _members(body: list[ast.stmt]) -> dict[str, list[ast.stmt]]:
    """A class body's (or a module's) names, each with the statements binding it."""
    out: dict[str, list[ast.stmt]] = {}
    for stmt in _without_docstring(body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [stmt.name]
        elif isinstance(stmt, ast.Assign):
            names = [t.id for t in stmt.targets if isinstance(t, ast.Name)] or ["(other statements)"]
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names = [stmt.target.id]
        else:
            names = ["(other statements)"]
        for name in names:
            out.setdefault(name, []).append(stmt)
    return out


def _source(nodes: list[ast.stmt], lines: list[str]) -> str:
    return "".join("".join(lines[_first(n) - 1 : getattr(n, "end_lineno", n.lineno)]) for n in nodes)


def _first(node: ast.stmt) -> int:
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])


def _same(a: list[ast.stmt], b: list[ast.stmt], lines_a: list[str], lines_b: list[str]) -> bool:
    """Equal as ``ast`` sees them; the same text first (it nearly always is, and costs no dump)."""
    return _source(a, lines_a) == _source(b, lines_b) or _dump(a) == _dump(b)


def _named(names: Iterable[str], limit: int = 8) -> str:
    listed = sorted(names)
    shown = ", ".join(listed[:limit])
    return shown + (f" (+{len(listed) - limit} more)" if len(listed) > limit else "")


def _members_change(
    old: dict[str, list[ast.stmt]], new: dict[str, list[ast.stmt]], lines_a: list[str], lines_b: list[str]
) -> str:
    changed = [n for n in old.keys() & new.keys() if not _same(old[n], new[n], lines_a, lines_b)]
    added, gone = new.keys() - old.keys(), old.keys() - new.keys()
    said = []
    if changed:
        said.append(f"{len(changed)} changed ({_named(changed)})")
    if added:
        said.append(f"{len(added)} added ({_named(added)})")
    if gone:
        said.append(f"{len(gone)} removed ({_named(gone)})")
    return "members: " + "; ".join(said) if said else ""


def parts_of(
    old: Definition, new: Definition, old_resolver: Resolver, new_resolver: Resolver
) -> tuple[tuple[str, ...], str]:
    """What differs between two definitions of a name, and the members that did (for classes, modules)."""
    a, b = old.node, new.node
    if old.kind != new.kind:
        return ("kind",), f"was a {old.kind}, is a {new.kind}"
    lines_a, lines_b = old_resolver.package.lines(old.path), new_resolver.package.lines(new.path)
    if old.kind == "module":
        ma, mb = old_resolver.module(old.module), new_resolver.module(new.module)
        if ma is None or mb is None:
            return (), ""
        detail = _members_change(_members(ma.tree.body), _members(mb.tree.body), lines_a, lines_b)
        return (("members",), detail) if detail else ((), "")
    if isinstance(a, ast.stmt) and isinstance(b, ast.stmt) and _source([a], lines_a) == _source([b], lines_b):
        return (), ""
    if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef)) and isinstance(
        b, (ast.FunctionDef, ast.AsyncFunctionDef)
    ):
        parts = []
        if _signature(a) != _signature(b):
            parts.append("signature")
        if _dump(_without_docstring(a.body)) != _dump(_without_docstring(b.body)):
            parts.append("body")
        return tuple(parts), ""
    if isinstance(a, ast.ClassDef) and isinstance(b, ast.ClassDef):
        parts = []
        if _dump([*a.bases, *a.keywords, *a.decorator_list]) != _dump([*b.bases, *b.keywords, *b.decorator_list]):
            parts.append("bases")
        detail = _members_change(_members(a.body), _members(b.body), lines_a, lines_b)
        if detail:
            parts.append("members")
        return tuple(parts), detail
    value_a = a.value if isinstance(a, (ast.Assign, ast.AnnAssign)) else a
    value_b = b.value if isinstance(b, (ast.Assign, ast.AnnAssign)) else b
    annotation_a = a.annotation if isinstance(a, ast.AnnAssign) else None
    annotation_b = b.annotation if isinstance(b, ast.AnnAssign) else None
    return (("value",), "") if _dump([value_a, annotation_a]) != _dump([value_b, annotation_b]) else ((), "")


def text_of(resolver: Resolver, definition: Definition) -> str:
    """The definition's own lines in its file (decorators included)."""
    span = lines_of(definition)
    if span is None:
        return ""
    return "".join(resolver.package.lines(definition.path)[span[0] - 1 : span[1]])


def lines_of(definition: Definition) -> tuple[int, int] | None:
    """Its lines in its file, decorators included (None: a module), known without its node."""
    return definition.span


def _diff(old: Definition, new: Definition, a: Resolver, b: Resolver) -> str:
    if old.kind == "module" or new.kind == "module":
        return ""
    return "".join(
        difflib.unified_diff(
            text_of(a, old).splitlines(keepends=True),
            text_of(b, new).splitlines(keepends=True),
            f"{old.path}@{a.label}",
            f"{new.path}@{b.label}",
            n=2,
        )
    )


class Mover:
    """Where in release B a name gone from its old place went: B's top-level names, by module, read once."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self._where: dict[str, list[str]] | None = None

    def _index(self) -> dict[str, list[str]]:
        if self._where is None:
            where: dict[str, list[str]] = {}
            package = self.resolver.package
            for path in sorted(package.paths):
                module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
                for found in _TOP_LEVEL.finditer(package.text(path) or ""):
                    where.setdefault(found[1] or found[2], []).append(module)
            self._where = where
        return self._where

    def find(self, old: Definition, old_resolver: Resolver) -> Definition | None:
        """B's definition of ``old`` under another module, by the same name and kind, when the move can be shown
        (``candidates``: exactly one)."""
        found = self.candidates(old, old_resolver)
        return found[0] if len(found) == 1 else None

    def candidates(self, old: Definition, old_resolver: Resolver) -> list[Definition]:
        """Where ``old`` may have gone: B's definitions like it under another module, by name and kind.

        A member moves only with its class: while the class still stands at B where it was, a method gone from
        it was removed from it, and a namesake in another class (another runner, another role) is not where it
        went. A candidate A had already is another definition that was there all along (a GPU input batch is not
        where the TPU one went). More than one candidate is no move either: which one is a person's call.
        """
        if old.kind == "module":
            moved = self._module(old, old_resolver)
            return [moved] if moved is not None else []
        head = old.qualname.partition(".")[0]
        if "." in old.qualname and isinstance(self.resolver.resolve(f"{old.module}.{head}"), Definition):
            return []  # its class stands where it was: the member was removed from it
        found_all = []
        for module in dict.fromkeys(self._index().get(head, [])):
            found = self.resolver.resolve(f"{module}.{old.qualname}")
            if not isinstance(found, Definition) or found.kind != old.kind or found.name == old.name:
                continue
            if found.module != module:  # a re-export of it: the defining module is listed too
                continue
            if isinstance(old_resolver.resolve(found.name), Definition):  # there at A already: not where it went
                continue
            if _likeness(old, found) >= MOVED_LIKENESS:
                found_all.append(found)
        return found_all

    def namesakes(self, old: Definition) -> list[str]:
        """B's definitions of the same name and kind elsewhere (for a report: none of them is shown to be it)."""
        head = old.qualname.partition(".")[0]
        out = []
        for module in dict.fromkeys(self._index().get(head, [])):
            found = self.resolver.resolve(f"{module}.{old.qualname}")
            same_kind = isinstance(found, Definition) and found.kind == old.kind and found.name != old.name
            if same_kind and found.module == module:  # type: ignore[union-attr]
                out.append(found.name)  # type: ignore[union-attr]
        return out

    def _module(self, old: Definition, old_resolver: Resolver) -> Definition | None:
        """Where a module gone at B went whole: a module of the same file name that A did not have, holding
        at least ``MOVED_BY_MEMBERS`` of its top-level names (a package split or renamed around it)."""
        at_a = old_resolver.module(old.module)
        if at_a is None:
            return None
        names = sorted(set(_members(at_a.tree.body)) - {"(other statements)"})
        leaf = old.module.rpartition(".")[2]
        best: tuple[float, Definition] | None = None
        for path in sorted(self.resolver.package.paths):
            module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            if module.rpartition(".")[2] != leaf or old_resolver.module(module) is not None:
                continue
            found = self.resolver.module(module)
            if found is None:
                continue
            theirs = sorted(set(_members(found.tree.body)) - {"(other statements)"})
            likeness = difflib.SequenceMatcher(None, names, theirs, autojunk=False).ratio() if names else 0.0
            if likeness >= MOVED_BY_MEMBERS and (best is None or likeness > best[0]):
                best = (likeness, Definition(module, module, found.path, "", "module", release=self.resolver.label))
        return best[1] if best else None


def _likeness(a: Definition, b: Definition) -> float:
    def statements(d: Definition) -> list[str]:
        node = d.node
        body = getattr(node, "body", None)
        if isinstance(body, list):
            return [reading.dump(s) for s in _without_docstring(body)]
        return [reading.dump(node)] if node is not None else []

    likeness = difflib.SequenceMatcher(None, statements(a), statements(b), autojunk=False).ratio()
    old, new = a.node, b.node
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    if isinstance(old, defs) and isinstance(new, defs):
        said = ast.get_docstring(old, clean=True)
        if said and len(said) >= MOVED_BY_DOCSTRING and said == ast.get_docstring(new, clean=True):
            likeness = max(likeness, MOVED_LIKENESS)
    if isinstance(old, ast.ClassDef) and isinstance(new, ast.ClassDef):
        # A class that moved whole and changed its methods too shares no method's statements; its
        # members' names it keeps. Held to more of them: a name alone says less than a statement.
        names = sorted(_members(old.body)), sorted(_members(new.body))
        by_name = difflib.SequenceMatcher(None, *names, autojunk=False).ratio()
        if by_name >= MOVED_BY_MEMBERS:
            likeness = max(likeness, by_name)
    return likeness


def judge(name: str, old: Resolution, new: Resolution, a: Resolver, b: Resolver, mover: Mover) -> Change:
    """The status of ``name`` from release A (``old``) to B (``new``)."""
    if isinstance(old, NotFound) and old.unresolved:
        return Change(UNRESOLVED, detail=f"at {a.label}: {old.why}")
    if isinstance(new, NotFound) and new.unresolved:
        return Change(UNRESOLVED, detail=f"at {b.label}: {new.why}", old=old if isinstance(old, Definition) else None)
    if isinstance(old, NotFound) and isinstance(new, NotFound):
        return Change(UNRESOLVED, detail=f"{name} resolves to nothing at {a.label} nor at {b.label}: {old.why}")
    if isinstance(old, NotFound):
        assert isinstance(new, Definition)
        return Change(ADDED, detail=f"new at {b.label} ({new.kind} {new.name})", new=new)
    assert isinstance(old, Definition)
    if isinstance(new, NotFound):
        # The path the tree uses is gone. Reached through a re-export, the definition may still stand where
        # it was defined; reached as a member a class inherited, it went with the class.
        reexported = old.name != name and name.endswith("." + old.qualname)
        kept = b.resolve(old.name) if reexported else new
        moved = kept if isinstance(kept, Definition) else mover.find(old, a) if old.name == name else None
        if moved is None:
            others = mover.namesakes(old) if old.name == name else []
            maybe = f"; moved? not shown: B has {', '.join(others[:4])}" if others else ""
            return Change(REMOVED, detail=f"{new.why}{maybe}", old=old)
        parts, detail = parts_of(old, moved, a, b)
        diff = _diff(old, moved, a, b) if parts else ""
        where = f"{name} is gone at {b.label} ({new.why}); it is {moved.name} there"
        return Change(MOVED, parts, f"{where}; {detail}" if detail else where, moved.name, old, moved, diff)
    parts, detail = parts_of(old, new, a, b)
    diff = _diff(old, new, a, b) if parts else ""
    if new.qualname != old.qualname:  # another class defines it now (inherited, or overridden): a change
        where = f"defined by {new.name} at {b.label}, by {old.name} at {a.label}"
        return Change(CHANGED, ("defined in", *parts), f"{where}; {detail}" if detail else where, None, old, new, diff)
    if new.module != old.module:
        where = f"now defined as {new.name}"
        return Change(MOVED, parts, f"{where}; {detail}" if detail else where, new.name, old, new, diff)
    return Change(CHANGED if parts else UNCHANGED, parts, detail, None, old, new, diff)

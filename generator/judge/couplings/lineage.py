"""The tree's classes and what each derives from: vLLM classes, and the tree's own classes on the way.

``overrides`` needs, for each class of the tree, the vLLM classes it derives from (through the tree's own
classes, in any file) and, of several that define a method, the one Python's method resolution reaches
first; the verdicts need, for each vLLM class, the tree's leaf classes below it (what gets instantiated).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from generator.judge.couplings import inherited, sites, verdicts
from generator.judge.couplings.bindings import Exports, Ref, follow
from generator.judge.couplings.instances import Family, Use
from generator.judge.couplings.judged import Judged
from generator.judge.couplings.objects import Built
from generator.judge.couplings.upstream import Definition, Resolver


def tree_modules(scans: Sequence[sites.FileScan]) -> tuple[frozenset[str], Exports]:
    """The tree's module names (``pkg.mod``; under ``src/`` also without it) and what each binds."""
    names: set[str] = set()
    exports: Exports = {}
    for scan in scans:
        for name in {scan.module, scan.module.removeprefix("src.")}:
            names.add(name)
            exports[name] = scan.exports
    return frozenset(names), exports


class Lineage:
    """The tree's classes with what each derives from: vLLM classes, and the tree's own classes on the way."""

    def __init__(self, scans: Sequence[sites.FileScan]) -> None:
        self.modules, self.exports = tree_modules(scans)
        self.classes = {(c.module, c.qualname): c for scan in scans for c in scan.classes}
        self._found: dict[tuple[str, str], tuple[list[str], list[tuple[str, str]]]] = {}

    def of(self, cls: sites.TreeClass, depth: int = 0) -> tuple[list[str], list[tuple[str, str]]]:
        """(the vLLM classes ``cls`` derives from, in order; the tree's classes between, as (module, qualname))."""
        key = (cls.module, cls.qualname)
        if key in self._found or depth > 20:
            return self._found.get(key, ([], []))
        self._found[key] = ([], [])
        vllm: list[str] = []
        own: list[tuple[str, str]] = []

        def through(base: sites.TreeClass) -> None:
            more_vllm, more_own = self.of(base, depth + 1)
            vllm.extend(more_vllm)
            own.extend([(base.module, base.qualname), *more_own])

        for local in cls.local_bases:
            if (base := self.classes.get((cls.module, local))) is not None:
                through(base)
        for refs_of in cls.bases:
            for ref in refs_of:
                # A class of the tree's own binds nothing ``follow`` goes on with: its path is the class.
                for target in [ref] if self._tree_class(ref.path) else follow(ref, self.exports, self.modules):
                    if target.in_vllm:
                        vllm.append(target.path)
                        continue
                    module, _, name = target.path.rpartition(".")
                    if (base := self.classes.get((module, name))) is not None:
                        through(base)
        self._found[key] = (list(dict.fromkeys(vllm)), list(dict.fromkeys(own)))
        return self._found[key]

    def _tree_class(self, path: str) -> bool:
        module, _, name = path.rpartition(".")
        return (module, name) in self.classes

    def derived_in(self) -> dict[str, frozenset[str]]:
        """Each vLLM class the tree's classes name as a base -> the tree's modules whose classes name it: the
        files whose import of it builds a class (a file importing it for a test's isinstance does not)."""
        out: dict[str, set[str]] = {}
        for cls in self.classes.values():
            for refs_of in cls.bases:
                for ref in refs_of:
                    if self._tree_class(ref.path):
                        continue
                    for target in follow(ref, self.exports, self.modules):
                        if target.in_vllm:
                            out.setdefault(target.path, set()).add(cls.module)
        return {name: frozenset(found) for name, found in out.items()}

    def subclasses(self) -> dict[str, tuple[verdicts.Subclass, ...]]:
        """Each vLLM class the tree derives from -> the tree's leaf classes below it (what gets instantiated),
        each with the names it and the tree's classes between bind and the attributes they assign."""
        inner = {own for cls in self.classes.values() for own in self.of(cls)[1]}
        out: dict[str, set[verdicts.Subclass]] = {}
        for key, cls in sorted(self.classes.items()):
            if key in inner:
                continue
            bases, between = self.of(cls)
            family = [cls, *(self.classes[k] for k in between if k in self.classes)]
            binds = frozenset(n for c in family for n in (*c.methods, *c.attributes))
            assigns = frozenset(n for c in family for n in c.assigns)
            for base in bases:
                out.setdefault(base, set()).add(verdicts.Subclass(cls.qualname, binds, assigns))
        return {base: tuple(sorted(found)) for base, found in out.items()}

    def family(self, cls: sites.TreeClass) -> Family:
        """What ``cls`` and the tree's classes between it and vLLM write (``instances``)."""
        between = [self.classes[k] for k in self.of(cls)[1] if k in self.classes]
        chain = [cls, *between]
        init = next((c for c in chain if "__init__" in c.methods or "__new__" in c.methods), None)
        return Family(
            cls.qualname,
            frozenset(n for c in chain for n in (*c.methods, *c.attributes)),
            frozenset(n for c in chain for n in c.assigns),
            init is not None,
            init is not None and bool(init.super_calls.get("__init__")),
            tuple(c.fields for c in reversed(chain) if c.fields is not None),
            frozenset(n for c in chain for n, _ in c.reads),
        )

    def class_of(self, ref: Ref) -> sites.TreeClass | None:
        """The tree's class a reference names (through the tree's own modules), if any."""
        for target in [ref] if self._tree_class(ref.path) else follow(ref, self.exports, self.modules):
            module, _, name = target.path.rpartition(".")
            if (found := self.classes.get((module, name))) is not None:
                return found
        return None

    def _named_bases(self, cls: sites.TreeClass) -> list[tuple[str, str]]:
        """(vLLM class, the module whose class statement names it) for ``cls`` and the tree's classes between."""
        out = []
        for one in [cls, *(self.classes[k] for k in self.of(cls)[1] if k in self.classes)]:
            for refs_of in one.bases:
                for ref in refs_of:
                    if not self._tree_class(ref.path):
                        out += [(t.path, one.module) for t in follow(ref, self.exports, self.modules) if t.in_vllm]
        return list(dict.fromkeys(out))

    def uses(self, scans: Sequence[sites.FileScan]) -> dict[tuple[str, str], list[Use]]:
        """(a vLLM class the tree derives from, the module whose class statement names it) -> what the tree does
        with objects of its classes below it there: calls of them, attributes set on them, objects built bare,
        an ``__init__`` without the base's."""
        out: dict[tuple[str, str], list[Use]] = {}
        families: dict[tuple[str, str], Family] = {}

        def add(cls: sites.TreeClass, use: Use) -> None:
            for key in self._named_bases(cls):
                out.setdefault(key, []).append(use)

        def family(cls: sites.TreeClass) -> Family:
            key = (cls.module, cls.qualname)
            if key not in families:
                families[key] = self.family(cls)
            return families[key]

        direct: dict[str, Family] = {}  # a vLLM class the tree builds objects of itself, by its path

        def vllm_class(path: str) -> Family:
            if path not in direct:
                empty: frozenset[str] = frozenset()
                direct[path] = Family(path.rpartition(".")[2], empty, empty, False, True, ())
            return direct[path]

        for cls in self.classes.values():
            found = family(cls)
            if found.own_init and not found.calls_base_init and "__init__" in cls.methods and self.of(cls)[0]:
                line = cls.methods["__init__"]
                add(cls, Use(found, cls.path, line, "init", end=cls.ends.get("__init__", line)))
            if cls.reads and self.of(cls)[0]:
                names, lines = tuple(n for n, _ in cls.reads), tuple(line for _, line in cls.reads)
                add(cls, Use(found, cls.path, cls.line, "reads", attrs=names, lines=lines))

        for scan in scans:
            for call in scan.calls:
                called = None if call.ref.in_vllm else self.class_of(call.ref)
                if called is not None and self.of(called)[0]:
                    add(called, Use(family(called), scan.path, call.line, "call", call.call))
            for built in scan.built:
                if built.cls.in_vllm:  # an object of a vLLM class, built here: judged at this file's import of it
                    owner = vllm_class(built.cls.path)
                    key = (built.cls.path, scan.module)
                    for attr, line in built.assigns:
                        out.setdefault(key, []).append(Use(owner, scan.path, line, "assign", attrs=(attr,)))
                    methods = tuple(sorted({m for m, _ in built.calls}))
                    if built.bare:
                        attrs = tuple(sorted({a for a, _ in built.assigns}))
                        out.setdefault(key, []).append(
                            Use(owner, scan.path, built.line, "bare", attrs=attrs, methods=methods)
                        )
                    if built.calls:
                        out.setdefault(key, []).append(_calls_use(owner, scan.path, built))
                    continue
                made = self.class_of(built.cls)
                if made is None or not self.of(made)[0]:
                    continue
                for attr, line in built.assigns:
                    add(made, Use(family(made), scan.path, line, "assign", attrs=(attr,)))
                methods = tuple(sorted({m for m, _ in built.calls}))
                if built.bare:
                    attrs = tuple(sorted({a for a, _ in built.assigns}))
                    add(made, Use(family(made), scan.path, built.line, "bare", attrs=attrs, methods=methods))
                if built.calls:
                    add(made, _calls_use(family(made), scan.path, built))
        return out


def _calls_use(family: Family, path: str, built: Built) -> Use:
    """The methods the tree calls on an object it built, each with the first line that calls it."""
    first: dict[str, int] = {}
    for method, line in built.calls:
        first[method] = min(first.get(method, line), line)
    names = tuple(sorted(first))
    return Use(family, path, built.line, "calls", attrs=names, lines=tuple(first[n] for n in names))


def nearest(defining: list[str], a: Resolver, b: Resolver, memo: Judged) -> str:
    """Of the vLLM bases defining a method, the one Python's method resolution reaches first: the first
    listed that no other of them derives from (``class Q(TreeBase, vllm.Mtp)`` where ``TreeBase`` derives
    from ``vllm.AutoRegressive`` and ``Mtp`` does too: ``Mtp`` comes first)."""
    if len(defining) == 1:
        return defining[0]
    ancestry = {base: memo.get("ancestry", base, functools.partial(_ancestry, a, b, base)) for base in defining}
    for base in defining:
        own = ancestry[base][0]
        if not any(own & ancestry[other][1] for other in defining if other != base):
            return base
    return defining[0]


def _ancestry(a: Resolver, b: Resolver, name: str) -> tuple[frozenset[str], frozenset[str]]:
    """Where the class ``name`` is defined, at A and at B, and the vLLM classes it derives from there."""
    own: set[str] = set()
    above: set[str] = set()
    for resolver in (a, b):
        found = resolver.resolve(name)
        if isinstance(found, Definition) and found.kind == "class":
            own.add(found.name)
            above.update(c.name for c in inherited.lineage(resolver, found)[1:])
    return frozenset(own), frozenset(above)

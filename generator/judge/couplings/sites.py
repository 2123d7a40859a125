"""One file of a tree read for its couplings: the vLLM names it imports, what it patches, its classes.

A *patch* is a statement that replaces, adds or removes an attribute of something the file's names
reach (``bindings``): ``Cls.attr = ...`` (any value: ``property(...)``, ``staticmethod(...)``, a
lambda), ``mod.fn = ...``, ``vllm.x.y.fn = ...``, ``setattr(obj, "attr", ...)``, ``delattr``,
``del obj.attr``, ``obj.__dict__["attr"] = ...``, an item of a container (``REGISTRY["k"] = ...``),
a module swapped in ``sys.modules``, and a test's ``mock.patch("vllm....")``, ``patch.object`` or
``monkeypatch.setattr``, wherever the statement is (module level or inside a function: which of them
run at start-up is the tree's business; each is a coupling). Which are vLLM's is decided once every
file is read (a name may come through another module of the tree). What touches vLLM but cannot be
named statically (an attribute name computed at run time, a loop over ``sys.modules``, a replaced
import hook) is an *unresolved* site with why.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from generator.judge import gates
from generator.judge.couplings.bindings import (
    Ref,
    Scope,
    absolute,
    bind_arguments,
    bind_statement,
    module_name,
    refs,
)
from generator.judge.couplings.classbody import Field, class_statements, own_fields, self_assigned, self_read
from generator.judge.couplings.objects import Built, built_in
from generator.judge.couplings.signatures import Call, Receiver, Signature, call_of, of

_MOCK_PATCH = frozenset({"unittest.mock.patch", "mock.patch"})
_MOCK_OBJECT = frozenset({"unittest.mock.patch.object", "mock.patch.object"})
_CALL_WORDS = ("setattr", "delattr", "patch")
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


@dataclass(frozen=True)
class Site:
    kind: str  # import | patch | unresolved
    line: int
    ref: Ref  # as the file names it; a name of the tree's own modules is followed later
    detail: str = ""
    why: str = ""  # unresolved: why it cannot be named
    # An import: the module the statement imports (``import a.b`` -> ``a.b``, ``from a.b import X`` -> ``a.b``),
    # which Python finds as a file (no package's ``__getattr__`` serves it), as the file names it.
    module: str = ""
    # A patch that installs a function: the file's own (``Cls.m = staticmethod(_impl)``, a lambda), or a name
    # of another module of the tree it imports (``installs_from``, its kind in ``installs_kind``), read later.
    installs: Receiver | None = None
    installs_from: Ref | None = None
    installs_kind: str = ""
    # A test's patch that adds the attribute when it is missing (``create=True``, ``raising=False``): it never
    # raises for a target B no longer has.
    creates: bool = False


@dataclass
class TreeClass:
    """A class of the tree: its bases as references, its methods (name -> line)."""

    path: str
    module: str
    qualname: str
    line: int
    bases: list[list[Ref]]
    local_bases: list[str]  # bases that are classes of the same file, by qualname
    methods: dict[str, int]
    # Each method's own signature, and what its ``super().<same name>(...)`` calls pass: what decides whether
    # a changed base signature breaks the override.
    signatures: dict[str, Signature] = field(default_factory=dict)
    super_calls: dict[str, tuple[tuple[int, Call], ...]] = field(default_factory=dict)
    # What the class binds besides its methods: class-level names, and ``self.<name> = ...`` in its methods
    # (a base's new abstract method it already binds is no gap; a base's read-only property it assigns is).
    attributes: frozenset[str] = frozenset()
    assigns: frozenset[str] = frozenset()
    # Each method's kind (plain | static | class: how a call binds it) and last line.
    kinds: dict[str, str] = field(default_factory=dict)
    ends: dict[str, int] = field(default_factory=dict)
    # A dataclass's or NamedTuple's own fields (``classbody.own_fields``; None: it generates no ``__init__``), and
    # the attributes its methods read on ``self``.
    fields: tuple[Field, ...] | None = None
    reads: tuple[tuple[str, int], ...] = ()  # (attribute, the first line reading it), by name


@dataclass(frozen=True)
class CallSite:
    """A call of a name the file reaches (``gpu_ids(rank, 2)``): what it passes, against the callee's signature."""

    line: int
    ref: Ref
    call: Call


@dataclass
class FileScan:
    path: str
    module: str
    sites: list[Site] = field(default_factory=list)
    classes: list[TreeClass] = field(default_factory=list)
    exports: dict[str, list[Ref]] = field(default_factory=dict)
    calls: list[CallSite] = field(default_factory=list)
    functions: dict[str, Receiver] = field(default_factory=dict)  # the module's own top-level functions
    built: list[Built] = field(default_factory=list)  # objects its functions build of a class it names
    # Its version gates (the lines that run only where a test naming a gate helper holds), and its own
    # functions that are gate helpers (their dotted path -> how they compare the version: ``gates.helper_op``).
    regions: list[gates.Region] = field(default_factory=list)
    helpers: dict[str, str] = field(default_factory=dict)
    syntax: str = ""  # read with a newer Python's syntax than the running one (newer_syntax): what it needs


def _short(node: ast.AST | None, lines: list[str], limit: int = 60) -> str:
    """The start of ``node``'s own text (its first line, from its column), for a message."""
    if not isinstance(node, ast.expr) or node.lineno > len(lines):
        return ""
    line = lines[node.lineno - 1].encode()  # ast columns are UTF-8 byte offsets
    one_line = node.end_lineno == node.lineno and node.end_col_offset is not None
    end = node.end_col_offset if one_line else len(line)
    text = " ".join(line[node.col_offset : end].decode(errors="replace").split())
    return text if len(text) <= limit and one_line else text[: limit - 3].rstrip() + "..."


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Walker:
    def __init__(self, path: str, calls: bool, lines: list[str]) -> None:
        self.path = path
        self.lines = lines
        self.calls = calls  # the file may patch by a call (setattr, delattr, mock.patch): only then are calls read
        self.module = module_name(path)
        self.is_package = path.endswith("__init__.py")
        self.scan = FileScan(path, self.module)
        self.top_classes: dict[str, str] = {}  # a top-level class's name -> qualname
        self.defs: list[dict[str, Receiver]] = []  # the functions each enclosing scope defines, innermost last
        self.own_classes: dict[str, str] = {}  # the file's top-level classes, by name, as dotted paths

    def site(
        self,
        kind: str,
        node: ast.AST,
        ref: Ref,
        detail: str = "",
        why: str = "",
        module: str = "",
        installs: tuple[Receiver | None, Ref | None, str] = (None, None, ""),
        creates: bool = False,
    ) -> None:
        line = getattr(node, "lineno", 0)
        self.scan.sites.append(Site(kind, line, ref, detail, why, module, *installs, creates=creates))

    def functions_of(self, body: Sequence[ast.stmt], prefix: str) -> dict[str, Receiver]:
        """The functions a module's or a function's body defines, as what a patch may install."""
        return {
            node.name: Receiver(f"{prefix}{node.name}", self.path, node.lineno, node.end_lineno or node.lineno,
                                of(node.args), "function")
            for node in scope_statements(body)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        }  # fmt: skip

    def installed(self, value: ast.AST | None, scope: Scope) -> tuple[Receiver | None, Ref | None, str]:
        """What a patch's value installs, when it is a function the tree defines: ``f``, ``staticmethod(f)``,
        ``classmethod(f)`` or a lambda, with how a call binds it (``installs``); a name another module of the
        tree binds (``installs_from``) is read once every file is. A plain function put on a module is bound
        by no call, as on a class by none through the class: ``plain`` serves both."""
        kind = "plain"
        wrapper = value.func.id if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) else ""
        if wrapper in ("staticmethod", "classmethod") and len(value.args) == 1 and not scope.lookup(wrapper):  # type: ignore[union-attr]
            kind = "static" if wrapper == "staticmethod" else "class"
            value = value.args[0]  # type: ignore[union-attr]
        if isinstance(value, ast.Lambda):
            end = value.end_lineno or value.lineno
            return Receiver("<lambda>", self.path, value.lineno, end, of(value.args), kind), None, ""
        if not isinstance(value, ast.Name):
            return None, None, ""
        for defs in reversed(self.defs):
            if (found := defs.get(value.id)) is not None:
                return replace(found, kind=kind), None, ""
        for ref in refs(value, scope):
            if not ref.in_vllm:
                return None, ref, kind
        return None, None, ""

    def fill(self, scope: Scope, body: Sequence[ast.stmt]) -> None:
        for node in scope_statements(body):
            bind_statement(node, scope, self.module, self.is_package)

    def visit(self, body: Sequence[ast.stmt], scope: Scope, prefix: str) -> None:
        looping = {id(s) for loop in scope_statements(body) if self._over_modules(loop, scope) for s in _inside(loop)}
        for node in scope_statements(body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(node, scope, prefix)
            elif isinstance(node, ast.ClassDef):
                self.klass(node, scope, prefix)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports(node, scope)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    self.assigned(target, node.value, scope, node)
            elif isinstance(node, ast.Delete):
                for target in node.targets:
                    if isinstance(target, ast.Attribute):
                        for ref in refs(target.value, scope):
                            self.site("patch", node, ref.child(target.attr), "deletes it")
            for call in _calls(node):
                if self.calls:
                    self.call(call, scope, id(node) in looping)
                for ref in refs(call.func, scope):
                    self.scan.calls.append(CallSite(call.lineno, ref, call_of(call)))

    def _over_modules(self, node: ast.AST, scope: Scope) -> bool:
        if not isinstance(node, (ast.For, ast.AsyncFor)):
            return False
        return any(r.path == "sys.modules" for n in ast.walk(node.iter) for r in refs(n, scope))

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, parent: Scope, prefix: str) -> None:
        scope = Scope(parent, "function")
        bind_arguments(node.args, scope)
        self.fill(scope, node.body)
        inner = f"{prefix}{node.name}.<locals>."
        self.scan.built += built_in(node.body, scope, self.own_classes)
        self.defs.append(self.functions_of(node.body, inner))
        self.visit(node.body, scope, inner)
        self.defs.pop()

    def klass(self, node: ast.ClassDef, parent: Scope, prefix: str) -> None:
        qualname = f"{prefix}{node.name}"
        if not prefix:
            self.top_classes[node.name] = qualname
        local = [self.top_classes[b.id] for b in node.bases if isinstance(b, ast.Name) and b.id in self.top_classes]
        methods = {
            m.name: m.lineno
            for m in class_statements(node.body)
            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        bases = [refs(b, parent) for b in node.bases]
        defs = [m for m in class_statements(node.body) if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
        sigs = {m.name: of(m.args) for m in defs}
        supers = {m.name: super_calls(m) for m in defs}
        attributes = frozenset(_class_level_names(node.body))
        kinds = {m.name: method_kind(m) for m in defs}
        ends = {m.name: m.end_lineno or m.lineno for m in defs}
        self.scan.classes.append(
            TreeClass(
                self.path,
                self.module,
                qualname,
                node.lineno,
                bases,
                local,
                methods,
                sigs,
                supers,
                attributes,
                frozenset(name for m in defs for name in self_assigned(m)),
                kinds,
                ends,
                None if (found := own_fields(node)) is None else tuple(found),
                _first_reads(defs),
            )
        )
        scope = Scope(parent, "class")
        self.fill(scope, node.body)
        self.visit(node.body, scope, f"{qualname}.")

    def imports(self, node: ast.Import | ast.ImportFrom, scope: Scope) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.site("import", node, Ref(alias.name), "import", module=alias.name)
            return
        base = absolute(self.module, self.is_package, node.level, node.module) if node.level else (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                self.site("unresolved", node, Ref(base), why="a star import: the names it binds are not written")
            else:
                self.site("import", node, Ref(f"{base}.{alias.name}"), "from-import", module=base)

    def assigned(self, target: ast.AST, value: ast.AST | None, scope: Scope, node: ast.AST) -> None:
        what = f"assigns `{_short(value, self.lines)}`" if value is not None else "assigns"
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.assigned(elt, None, scope, node)
        elif isinstance(target, ast.Attribute):
            for ref in refs(target.value, scope):
                if ref.path == "builtins" and target.attr == "__import__":
                    self.site(
                        "unresolved",
                        node,
                        Ref("vllm"),
                        why="replaces Python's import hook: which vLLM modules it swaps is decided at run time",
                    )
                else:
                    self.site("patch", node, ref.child(target.attr), what, installs=self.installed(value, scope))
        elif isinstance(target, ast.Subscript):
            key = _string(target.slice)
            inner = target.value
            if isinstance(inner, ast.Attribute) and inner.attr == "__dict__" and key is not None:
                for ref in refs(inner.value, scope):
                    self.site("patch", node, ref.child(key), f"{what} through __dict__")
                return
            for ref in refs(inner, scope):
                if ref.path == "sys.modules" and key is not None:
                    self.site("patch", node, Ref(key), "replaces the module in sys.modules")
                else:
                    shown = f"[{key!r}]" if key is not None else "[...]"
                    self.site("patch", node, ref, f"sets the item {shown}")

    def call(self, node: ast.Call, scope: Scope, in_modules_loop: bool) -> None:
        func = node.func
        args = node.args
        callee = {r.path for r in refs(func, scope)}
        if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and not scope.lookup(func.id):
            if len(args) < 2:
                return
            name = _string(args[1])
            found = refs(args[0], scope)
            verb = "sets it by setattr" if func.id == "setattr" else "deletes it by delattr"
            value = args[2] if func.id == "setattr" and len(args) > 2 else None
            for ref in found:
                if name is not None:
                    self.site("patch", node, ref.child(name), verb, installs=self.installed(value, scope))
                else:
                    self.site("unresolved", node, ref, why=f"{func.id} with an attribute name computed at run time")
            if not found and in_modules_loop:
                self.site(
                    "unresolved",
                    node,
                    Ref("vllm"),
                    why=f"{func.id} on every module sys.modules holds: its targets are decided at run time",
                )
        elif callee & _MOCK_PATCH and args and (target := _string(args[0])) is not None:
            self.site("patch", node, Ref(target), "mock.patch", creates=_keyword_true(node, "create"))
        elif callee & _MOCK_OBJECT and len(args) >= 2 and (name := _string(args[1])) is not None:
            for ref in refs(args[0], scope):
                self.site("patch", node, ref.child(name), "mock.patch.object", creates=_keyword_true(node, "create"))
        elif isinstance(func, ast.Attribute) and func.attr == "setattr" and _is_monkeypatch(func.value):
            first = _string(args[0]) if args else None
            if first is not None and "." in first:
                self.site("patch", node, Ref(first), "monkeypatch.setattr", creates=_keyword_false(node, "raising"))
            elif len(args) >= 2 and (name := _string(args[1])) is not None:
                for ref in refs(args[0], scope):
                    self.site(
                        "patch", node, ref.child(name), "monkeypatch.setattr", creates=_keyword_false(node, "raising")
                    )


def scope_statements(body: Sequence[ast.AST]) -> Iterator[ast.stmt]:
    """A scope's statements, those of nested blocks too (and ``except`` clauses), not nested defs' or classes'."""
    for node in body:
        if isinstance(node, ast.stmt):
            yield node
        elif isinstance(node, ast.ExceptHandler):
            yield node  # type: ignore[misc]  # binds its name like a statement
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for block in _BLOCKS:
            children = getattr(node, block, None)
            if isinstance(children, list):
                for child in children:
                    yield from scope_statements(
                        getattr(child, "body", []) if isinstance(child, ast.match_case) else [child]
                    )


def _inside(loop: ast.stmt) -> Iterator[ast.stmt]:
    yield from scope_statements(getattr(loop, "body", []))


def _calls(node: ast.AST) -> Iterator[ast.Call]:
    """The calls in a statement's own expressions (its decorators, bases, defaults; not its blocks)."""
    for name, value in ast.iter_fields(node):
        if name in _BLOCKS:
            continue
        for part in value if isinstance(value, list) else [value]:
            if isinstance(part, ast.AST):
                for inner in ast.walk(part):
                    if isinstance(inner, ast.Call):
                        yield inner


def super_calls(method: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[tuple[int, Call], ...]:
    """``super().<method's name>(...)`` calls in the method's own body (nested defs' included: a closure's too)."""
    out = []
    for node in ast.walk(method):
        func = node.func if isinstance(node, ast.Call) else None
        if (
            isinstance(node, ast.Call)
            and isinstance(func, ast.Attribute)
            and func.attr == method.name
            and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super"
        ):
            out.append((node.lineno, call_of(node)))
    return tuple(sorted(out, key=lambda item: item[0]))


def _class_level_names(body: Sequence[ast.stmt]) -> Iterator[str]:
    for stmt in class_statements(body):
        targets = (
            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        )
        yield from (t.id for t in targets if isinstance(t, ast.Name))


def _first_reads(defs: Sequence[ast.FunctionDef | ast.AsyncFunctionDef]) -> tuple[tuple[str, int], ...]:
    found: dict[str, int] = {}
    for method in defs:
        for name, line in self_read(method).items():
            found[name] = min(found.get(name, line), line)
    return tuple(sorted(found.items()))


def method_kind(method: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """How a call binds a method of a class body: ``plain`` (the instance first), ``static``, ``class``."""
    names = {d.id for d in method.decorator_list if isinstance(d, ast.Name)}
    return "static" if "staticmethod" in names else "class" if "classmethod" in names else "plain"


def _callee(scope: Scope, func: ast.expr) -> list[str]:
    """What a gate's call calls, through the module's names; a bare name they do not bind (an import inside a
    function, the helper's own module) as ``?name``, which a helper of that name answers."""
    found = [r.path for r in refs(func, scope)]
    return found or ([f"?{func.id}"] if isinstance(func, ast.Name) else [])


def _keyword_true(call: ast.Call, name: str) -> bool:
    return any(k.arg == name and isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords)


def _keyword_false(call: ast.Call, name: str) -> bool:
    return any(k.arg == name and isinstance(k.value, ast.Constant) and k.value.value is False for k in call.keywords)


def _is_monkeypatch(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in ("monkeypatch", "mp")


def scan(tree: ast.Module, path: str, text: str | None = None) -> FileScan:
    """The couplings ``tree`` (the file at ``path``, relative to the tree's root) may make, unfollowed.

    ``text``, the file's source, lets a file that names no patching call skip reading its expressions.
    """
    source = text if text is not None else ast.unparse(tree)
    walker = _Walker(path, any(word in source for word in _CALL_WORDS), source.splitlines())
    top = Scope(None, "module")
    walker.fill(top, tree.body)
    walker.scan.functions = walker.functions_of(tree.body, "")
    walker.defs.append(walker.scan.functions)
    walker.own_classes = {n.name: f"{walker.module}.{n.name}" for n in tree.body if isinstance(n, ast.ClassDef)}
    walker.scan.built += built_in(tree.body, top, walker.own_classes)
    walker.scan.helpers = {
        f"{walker.module}.{node.name}": op
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (op := gates.helper_op(node)) is not None
    }
    walker.scan.regions = gates.regions(tree.body, functools.partial(_callee, top))
    walker.visit(tree.body, top, "")
    names = {*top.names, *top.pending}
    walker.scan.exports = {name: refs(ast.Name(name, ast.Load()), top) for name in sorted(names)}
    walker.scan.sites.sort(key=lambda s: s.line)
    return walker.scan

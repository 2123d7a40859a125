"""A dotted vLLM name resolved in one release's own files: where it is defined, and as what.

``vllm.config.ModelConfig`` is read the way Python would find it: the longest prefix that is a module
of the package (``vllm/config/__init__.py``), then each name in that module's top-level bindings
(classes, functions, assignments, and imports, which are followed: a re-export resolves to the
definition it imports), then members of a class (its own body, then its vLLM bases in order, as
its method resolution would find them). What is not found is *absent* (with what was looked for);
what Python would only know at run time (a module ``__getattr__``, an attribute of a function or of
a computed value, a name bound outside vLLM) is *unresolved*, with why. An import statement's module
(``from vllm.a.b import X`` imports ``vllm.a.b``) is no attribute: it must be a file of the release, or
the name is absent there (``imported``), whatever a package's ``__getattr__`` serves.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from generator.sources.package import Package

_DEPTH = 24  # re-exports and bases followed before giving up (a cycle of re-exports is upstream's bug)
_STAR = "*"  # the key of a module's ``from x import *`` statements among its bindings

Node = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | ast.Assign | ast.AnnAssign


@dataclass(frozen=True)
class Definition:
    """Where a name is defined at one release.

    Its node is the statement's tree as parsed, or, for a definition the judgement cache gave back
    (``judged``), parsed from its module when first asked for: most such definitions never are.
    """

    name: str  # canonical: the defining module and qualified name, ``vllm.config.model.ModelConfig``
    module: str
    path: str  # the module's file in the package
    qualname: str  # "" for a module
    kind: str  # module | class | function | value
    _node: ast.AST | None = field(default=None, compare=False, repr=False)  # None for a module
    span: tuple[int, int] | None = field(default=None, compare=False)  # its lines, decorators included
    release: str = field(default="", compare=False)  # the label of the release it is defined in
    _load: Callable[[], ast.AST | None] | None = field(default=None, compare=False, repr=False)

    @property
    def node(self) -> ast.AST | None:
        if self._load is not None:
            object.__setattr__(self, "_node", self._load())
            object.__setattr__(self, "_load", None)
        return self._node


def _span(node: ast.AST | None) -> tuple[int, int] | None:
    if node is None or not hasattr(node, "lineno"):
        return None
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return first, getattr(node, "end_lineno", node.lineno)


@dataclass(frozen=True)
class NotFound:
    """The name resolves to nothing at this release (``absent``), or to nothing known statically."""

    why: str
    unresolved: bool = False  # True: Python decides at run time; False: there is no such name


Resolution = Definition | NotFound


@dataclass
class _Module:
    name: str
    path: str
    tree: ast.Module
    bindings: dict[str, list[ast.AST]]  # a top-level name -> the statements binding it, in order
    is_package: bool


def bindings_of(body: list[ast.stmt]) -> dict[str, list[ast.AST]]:
    """A module's (or a class body's) top-level names, under ``if``/``try``/``with`` blocks too."""
    out: dict[str, list[ast.AST]] = {}

    def add(name: str, node: ast.AST) -> None:
        out.setdefault(name, []).append(node)

    def walk(stmts: list[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                add(node.name, node)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    for name in _names(target):
                        add(name, node)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                add(node.target.id, node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    add(alias.asname or alias.name.split(".")[0] if alias.name != "*" else _STAR, node)
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.AsyncWith)):
                walk(node.body)
                walk(getattr(node, "orelse", []))
                walk(getattr(node, "finalbody", []))
                for handler in getattr(node, "handlers", []):
                    walk(handler.body)

    walk(body)
    return out


def _names(target: ast.AST) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from _names(elt)


def _chosen(nodes: list[ast.AST]) -> ast.AST:
    """Of several bindings of one name, a definition over an import or an assignment, else the last."""
    defs = [n for n in nodes if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    return defs[-1] if defs else nodes[-1]


class Resolver:
    """Resolves dotted names in one release's package, parsing each module once, when first asked."""

    def __init__(self, package: Package) -> None:
        self.package = package
        self.label = package.label
        self._modules: dict[str, _Module | None] = {}
        self._cache: dict[str, Resolution] = {}
        self._exported: dict[str, set[str]] = {}

    def module(self, name: str) -> _Module | None:
        if name not in self._modules:
            path = self.package.module_path(name)
            text = self.package.text(path) if path is not None else None
            found = None
            if path is not None and text is not None:
                try:
                    tree = ast.parse(text, filename=path)
                except (SyntaxError, ValueError, RecursionError):
                    tree = ast.Module(body=[], type_ignores=[])
                found = _Module(name, path, tree, bindings_of(tree.body), path.endswith("__init__.py"))
            self._modules[name] = found
        return self._modules[name]

    def resolve(self, dotted: str) -> Resolution:
        if dotted not in self._cache:
            self._cache[dotted] = self._resolve(dotted, 0)
        return self._cache[dotted]

    def imported(self, dotted: str, module: str) -> Resolution:
        """``dotted`` as an import statement that imports ``module`` reaches it (``from module import X``)."""
        return self.missing(module) or self.resolve(dotted)

    def missing(self, module: str) -> NotFound | None:
        """Why an import statement that imports ``module`` fails at this release (None: it finds the module).

        The statement imports ``module`` and each package above it: each must be a file of the release
        (a module or a package's ``__init__``). A package's ``__getattr__`` serves its attributes, never
        a submodule an import statement imports, so a module the release has no file for is absent.
        """
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if not self._is_file(prefix):
                return NotFound(f"vLLM {self.label} has no module {prefix}: the import statement fails")
        return None

    def _is_file(self, module: str) -> bool:
        """``module`` is a file of the release (``module`` finds it), known without parsing it."""
        if module in self._modules:
            return self._modules[module] is not None
        path = self.package.module_path(module)
        return path is not None and self.package.text(path) is not None

    def _resolve(self, dotted: str, depth: int) -> Resolution:
        if depth > _DEPTH:
            return NotFound(f"{dotted} is re-exported in a circle at {self.label}", unresolved=True)
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            module = self.module(".".join(parts[:i]))
            if module is not None:
                return self._in_module(module, parts[i:], depth)
        return NotFound(f"vLLM {self.label} has no module {parts[0]}")

    def _in_module(self, module: _Module, rest: list[str], depth: int) -> Resolution:
        if not rest:
            return Definition(module.name, module.name, module.path, "", "module", release=self.label)
        name, more = rest[0], rest[1:]
        nodes = module.bindings.get(name) if name != _STAR else None
        if not nodes:
            if (sub := self.module(f"{module.name}.{name}")) is not None:
                return self._in_module(sub, more, depth)
            for star in reversed(module.bindings.get(_STAR, [])):  # the last one binding the name wins
                assert isinstance(star, ast.ImportFrom)
                source = self.module(_from_base(module, star))
                if source is not None and name in self.exported(source, depth):
                    return self._in_module(source, rest, depth + 1)
            if "__getattr__" in module.bindings:
                lazy = _lazy_names(module)
                if name in lazy:  # vllm/__init__.py's MODULE_ATTRS: "LLM": ".entrypoints.llm:LLM"
                    target, _, attribute = lazy[name].partition(":")
                    if target.startswith("."):
                        target = _from_base(module, ast.ImportFrom(module=target.lstrip("."), names=[], level=1))
                    return self._resolve(".".join([target, *filter(None, [attribute]), *more]), depth + 1)
                if not lazy:
                    return NotFound(f"{module.name}.{name} is served by {module.name}'s __getattr__ at run time", True)
            return NotFound(f"vLLM {self.label}'s {module.name} defines no {name}")
        node = _chosen(nodes)
        if isinstance(node, ast.ImportFrom):
            base = _from_base(module, node)
            alias = next(a for a in node.names if (a.asname or a.name) == name)
            target = f"{base}.{alias.name}"
            if not (target == "vllm" or target.startswith("vllm.")):
                return NotFound(f"{module.name}.{name} is {target}, outside vLLM", unresolved=True)
            return self._resolve(".".join([target, *more]), depth + 1)
        if isinstance(node, ast.Import):
            alias = next(a for a in node.names if (a.asname or a.name.split(".")[0]) == name)
            target = alias.name if alias.asname else name
            if not (target == "vllm" or target.startswith("vllm.")):
                return NotFound(f"{module.name}.{name} is the module {target}, outside vLLM", unresolved=True)
            return self._resolve(".".join([target, *more]), depth + 1)
        qualname = name
        return self._member(module, node, qualname, more, depth)

    def exported(self, module: _Module, depth: int = 0) -> set[str]:
        """The names ``from module import *`` binds: its ``__all__``, else its public top-level names."""
        if module.name not in self._exported:
            self._exported[module.name] = set()  # a star-import cycle ends here
            self._exported[module.name] = self._star_names(module, depth)
        return self._exported[module.name]

    def _star_names(self, module: _Module, depth: int) -> set[str]:
        declared = module.bindings.get("__all__", [])
        for node in declared:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(value, (ast.List, ast.Tuple)):
                return {e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        names = {n for n in module.bindings if not n.startswith("_") and n != _STAR}
        if depth < _DEPTH:
            for star in module.bindings.get(_STAR, []):
                assert isinstance(star, ast.ImportFrom)
                source = self.module(_from_base(module, star))
                if source is not None:
                    names |= self.exported(source, depth + 1)
        return names

    def _member(self, module: _Module, node: ast.AST, qualname: str, more: list[str], depth: int) -> Resolution:
        kind = _kind(node)
        if not more:
            name = f"{module.name}.{qualname}"
            return Definition(name, module.name, module.path, qualname, kind, node, _span(node), self.label)
        if isinstance(node, ast.ClassDef):
            name, rest = more[0], more[1:]
            members = bindings_of(node.body)
            if name in members:
                return self._member(module, _chosen(members[name]), f"{qualname}.{name}", rest, depth)
            for base in node.bases:
                found = self._base(module, base, depth)
                if isinstance(found, Definition) and found.kind == "class":
                    inherited = self._resolve(".".join([found.name, *more]), depth + 1)
                    if isinstance(inherited, Definition) or inherited.unresolved:
                        return inherited
            return NotFound(f"vLLM {self.label}'s {module.name}.{qualname} has no {name} (nor its vLLM bases)")
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            alias = _dotted(node.value)
            if alias is not None:  # ``X = other.Y``: an alias of another name
                found = self._in_module(module, [*alias.split("."), *more], depth + 1)
                if isinstance(found, Definition) or found.unresolved:
                    return found
        what = "function" if kind == "function" else "value"
        return NotFound(f"{module.name}.{qualname} is a {what}: its attribute {more[0]} is set at run time", True)

    def _base(self, module: _Module, base: ast.expr, depth: int) -> Resolution:
        dotted = _dotted(base)
        if dotted is None:
            return NotFound("a computed base", unresolved=True)
        return self._in_module(module, dotted.split("."), depth + 1)

    def bases(self, definition: Definition) -> list[Definition]:
        """A class's direct vLLM bases, resolved (bases outside vLLM, or unknown, left out)."""
        module = self.module(definition.module)
        if module is None or not isinstance(definition.node, ast.ClassDef):
            return []
        found = [self._base(module, b, 0) for b in definition.node.bases]
        return [d for d in found if isinstance(d, Definition) and d.kind == "class"]

    def node_of(self, module: str, qualname: str) -> ast.AST | None:
        """The statement defining ``qualname`` in ``module``, found as resolving it found it (None: a module)."""
        found = self.module(module)
        if found is None or not qualname:
            return None
        node: ast.AST | None = None
        bindings = found.bindings
        for part in qualname.split("."):
            if part not in bindings:
                raise LookupError(f"vLLM {self.label}'s {module} no longer defines {qualname}")
            node = _chosen(bindings[part])
            bindings = bindings_of(node.body) if isinstance(node, ast.ClassDef) else {}
        return node

    def has_attribute(self, dotted: str) -> bool | None:
        """Whether the module or class ``dotted``'s parent names binds its last name at this release, by any
        binding (an import of something outside vLLM too: ``mock.patch`` replaces whatever is there); None when
        the parent is not a module or class known statically."""
        parent, _, name = dotted.rpartition(".")
        found = self.resolve(parent) if parent else None
        if not isinstance(found, Definition):
            return None
        if found.kind == "module":
            module = self.module(found.module)
            if module is None:
                return False
            if name in module.bindings or self._is_file(f"{found.module}.{name}"):
                return True
            return None if "__getattr__" in module.bindings else False  # served at run time, or not
        if found.kind != "class":
            return None
        classes, todo = [found], [found]
        while todo and len(classes) < _DEPTH:
            for base in self.bases(todo.pop()):
                classes.append(base)
                todo.append(base)
        for cls in classes:
            if isinstance(cls.node, ast.ClassDef) and name in bindings_of(cls.node.body):
                return True
        if any(isinstance(c.node, ast.ClassDef) and not self._all_bases_known(c) for c in classes):
            return None  # a base outside vLLM may bind it
        return False

    def _all_bases_known(self, cls: Definition) -> bool:
        node = cls.node
        assert isinstance(node, ast.ClassDef)
        plain = {"object", "ABC", "abc.ABC", "Generic", "typing.Generic", "Protocol", "typing.Protocol"}
        known = len(self.bases(cls))
        return known == sum(1 for b in node.bases if (_dotted(b) or "") not in plain)

    def defines(self, class_name: str, member: str) -> Definition | None:
        """The definition of ``member`` a vLLM class has, its own or inherited from a vLLM base."""
        found = self.resolve(f"{class_name}.{member}")
        return found if isinstance(found, Definition) else None


def _lazy_names(module: _Module) -> dict[str, str]:
    """What a module's ``__getattr__`` serves, when it reads a dict of ``"name": "module:attribute"``."""
    out: dict[str, str] = {}
    for nodes in module.bindings.values():
        for node in nodes:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if not isinstance(value, ast.Dict) or not value.keys:
                continue
            pairs = [
                (k.value, v.value)
                for k, v in zip(value.keys, value.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
            ]
            if len(pairs) == len(value.keys) and all(isinstance(v, str) and ":" in v for _, v in pairs):
                out.update({str(k): str(v) for k, v in pairs})
    return out


def _kind(node: ast.AST) -> str:
    if isinstance(node, ast.ClassDef):
        return "class"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "function"
    return "value"


def _from_base(module: _Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def _dotted(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        inner = _dotted(expr.value)
        return None if inner is None else f"{inner}.{expr.attr}"
    if isinstance(expr, ast.Subscript):  # Generic[T], list[int]: the subscripted class
        return _dotted(expr.value)
    return None

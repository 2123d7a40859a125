"""Where one vLLM release's own code calls a definition: the calls a tree's function receives in its place.

A tree's override of a vLLM method, the function a patch installs in place of a vLLM function, are called
by vLLM's own code the way vLLM calls what they replace. This module finds those calls in a release's own
files, so a verdict binds each to the tree's function as Python would (``verdicts``), and ``adapt`` can
write the signature B's callers need. One reading serves both.

A call is found by its callee's last name (a text search picks the files that can hold one; only those are
parsed, once, by the release's resolver), in one of three forms:

- ``name``: a path the module's names reach, ``f(...)``, ``mod.f(...)``, ``Cls.m(...)`` (also a
  ``functools.partial(f, ...)``, whose own arguments are a call of ``f`` with more to come); resolved at
  the release to the definition it names, through re-exports and a class's bases;
- ``self``: ``self.m(...)`` or ``cls.m(...)`` in a method of a class: it reaches the ``m`` of the
  instance's class, so an override of any subclass;
- ``attr``: ``x.m(...)`` on a value not known statically: counted for a method only when every class of
  the release defining a method of that name derives from the method's own class (the name is its
  family's alone: ``get_supported_kernel_block_sizes``, never ``forward``).

``super().m(...)`` reaches the next class of vLLM's own hierarchy, never the tree's, and is not a call
of the tree's function. What a call passes is read as ``signatures.call_of`` reads the tree's calls.
"""

from __future__ import annotations

import ast
import multiprocessing
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from generator.judge.couplings import inherited, signatures
from generator.judge.couplings.signatures import Call, Receiver
from generator.judge.couplings.upstream import Definition, Resolver

NAME, SELF, ATTR = "name", "self", "attr"
_PARTIAL = ("functools.partial", "partial")
Scopes = tuple[dict[str, str | None], ...]  # the enclosing functions' names, the innermost last
Method = tuple[str | None, str | None]  # (the class's qualified name, its method's first parameter)


@dataclass(frozen=True)
class CallOf:
    """One call in a release's own code of something named ``name``, and how it names it."""

    path: str  # the release's file (``vllm/v1/core/kv_cache_manager.py``)
    line: int
    caller: str  # the qualified name of the function holding it ("" at module level)
    form: str  # name | self | attr
    target: str  # name: the dotted path as the module's names reach it; self: the class's name; attr: ""
    call: Call

    @property
    def site(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Named:
    """Every call of a name in a release, and the classes that define a method of that name."""

    calls: tuple[CallOf, ...]
    definers: tuple[str, ...]  # ``module.Qualname`` of each class whose body defines a method so named


class CallIndex:
    """The calls of one release's own code, read per name when first asked."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self._named: dict[str, Named] = {}
        self._resolved: dict[str, str | None] = {}
        self._lineages: dict[str, frozenset[str]] = {}

    def named(self, name: str) -> Named:
        if name not in self._named:
            self.prepare([name])
        return self._named[name]

    def prepare(self, names: Iterable[str]) -> None:
        """Read the calls of every name in ``names`` not read yet, in one pass over the release's files (in
        two worker processes when there are many: parsing them is most of the cost)."""
        wanted = sorted({n for n in names if n not in self._named and not n.startswith("__")})
        if not wanted:
            return
        # ``f(`` for a call, ``f,`` or ``f)`` for a ``partial(f, ...)``: a file with neither calls none of them
        word = re.compile(r"\b(" + "|".join(map(re.escape, wanted)) + r")\s*[(,)]")
        package = self.resolver.package
        jobs = []
        for path in sorted(package.paths):
            text = package.text(path)
            found = sorted(set(word.findall(text))) if text is not None else []
            if found:
                jobs.append((path, text or "", tuple(found)))
        calls: dict[str, list[CallOf]] = {n: [] for n in wanted}
        definers: dict[str, list[str]] = {n: [] for n in wanted}
        for found_calls, found_definers in _map(_read_file, jobs):
            for name, call in found_calls:
                calls[name].append(call)
            for name, cls in found_definers:
                definers[name].append(cls)
        for name in wanted:
            self._named[name] = Named(tuple(calls[name]), tuple(definers[name]))

    def resolved(self, dotted: str) -> str | None:
        """The canonical name of what ``dotted`` resolves to at this release (None: nothing known)."""
        if dotted not in self._resolved:
            found = self.resolver.resolve(dotted)
            self._resolved[dotted] = found.name if isinstance(found, Definition) else None
        return self._resolved[dotted]

    def lineage(self, cls: str) -> frozenset[str]:
        """The canonical names of ``cls`` and its vLLM bases at this release (empty: not a class here)."""
        if cls not in self._lineages:
            found = self.resolver.resolve(cls)
            names: frozenset[str] = frozenset()
            if isinstance(found, Definition) and found.kind == "class":
                names = frozenset(c.name for c in inherited.lineage(self.resolver, found))
            self._lineages[cls] = names
        return self._lineages[cls]

    def reaching(self, definition: Definition, owner: str | None, patched: bool) -> list[CallOf]:
        """The calls of this release's code that reach a tree function put in ``definition``'s place.

        ``owner``: for a method, the class the tree's function sits on (an override: the tree class's vLLM
        base; a patch: the class patched). A patch of a class's method also reaches its subclasses' calls
        through ``self`` (they inherit it); an override only its own bases' (the instance is the tree's).
        """
        name = definition.qualname.rpartition(".")[2] if definition.qualname else ""
        if not name or name.startswith("__"):
            return []  # a dunder is called by Python itself (``Cls(...)`` for ``__init__``), not by its name
        found = self.named(name)
        method = owner is not None and "." in definition.qualname
        family = self.lineage(owner) if method and owner else frozenset()
        out = []
        for call in found.calls:
            if call.form == NAME:
                resolved = self.resolved(call.target)
                if resolved == definition.name:
                    out.append(call)
                elif resolved is None and method and self._distinctive(definition, found):
                    out.append(CallOf(call.path, call.line, call.caller, ATTR, "", call.call))  # a value's method
            elif not method:
                continue
            elif call.form == SELF:
                if call.target in family or (patched and owner in self.lineage(call.target)):
                    out.append(call)
            elif call.form == ATTR and self._distinctive(definition, found):
                out.append(call)
        return out

    def _distinctive(self, definition: Definition, found: Named) -> bool:
        """Every class of the release defining a method of this name derives from the one defining it here."""
        home = f"{definition.module}.{definition.qualname.rpartition('.')[0]}"
        return bool(found.definers) and all(home in self.lineage(cls) for cls in found.definers)


def refusals(receiver: Receiver, at_a: list[CallOf], at_b: list[CallOf]) -> list[tuple[CallOf, str]]:
    """The calls of B's code that ``receiver`` refuses and no call at A made the same way (a form A's code
    already called it in failed at A already: not the bump's doing), each with why, by site."""
    seen = {_shape(c) for c in at_a}
    out = []
    for call in sorted(at_b, key=lambda c: (c.path, c.line)):
        if _shape(call) in seen:
            continue
        reason = signatures.refuses(call.call, receiver.bound_for(call.form != NAME))
        if reason is not None:
            out.append((call, reason))
    return out


def caller_class(call: CallOf) -> str | None:
    """The class whose method makes the call (``vllm.v1.worker.gpu.model_runner.GPUModelRunner``), None for a
    module's function."""
    owner, _, _ = call.caller.rpartition(".")
    if not owner or "<locals>" in call.caller:
        return None
    return f"{_module_of(call.path)}.{owner}"


_PARALLEL_FROM = 64  # files to parse before worker processes pay for their start


def _map(
    read: Callable[[tuple[str, str, tuple[str, ...]]], _Found], jobs: list[tuple[str, str, tuple[str, ...]]]
) -> list[_Found]:
    cores = os.cpu_count() or 1
    if len(jobs) < _PARALLEL_FROM or cores < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [read(job) for job in jobs]
    with multiprocessing.get_context("fork").Pool(2) as pool:  # others share the machine
        return pool.map(read, jobs, chunksize=16)


_Found = tuple[list[tuple[str, CallOf]], list[tuple[str, str]]]


def _read_file(job: tuple[str, str, tuple[str, ...]]) -> _Found:
    """One file's calls of the names asked, and its classes defining a method so named."""
    path, text, names = job
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError):
        return [], []
    reader = _ModuleReader(_module_of(path), path, path.endswith("__init__.py"), frozenset(names))
    reader.read(tree.body)
    return reader.calls, reader.definers


def _shape(call: CallOf) -> tuple[bool, int, frozenset[str], bool, bool]:
    """How a call binds, whatever the order of its keywords: through the class or not, what it passes."""
    return call.form == NAME, call.call.positional, frozenset(call.call.keywords), call.call.star, call.call.double_star


def _module_of(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class _ModuleReader:
    """One module's calls of ``name`` and its classes defining a method so named."""

    def __init__(self, module: str, path: str, is_package: bool, names: frozenset[str]) -> None:
        self.module = module
        self.path = path
        self.is_package = is_package
        self.names = names
        self.calls: list[tuple[str, CallOf]] = []
        self.definers: list[tuple[str, str]] = []
        self.top: dict[str, str | None] = {}

    def read(self, body: list[ast.stmt]) -> None:
        self.top = self._bindings(body, True)
        self._block(body, (), "", None)

    def _block(self, body: list[ast.stmt], scopes: Scopes, prefix: str, cls: str | None) -> None:
        """A module's or a class's body; ``scopes``: the enclosing functions' names, the innermost last (a
        class body's own names are not seen by its methods)."""
        caller = prefix.rstrip(".")
        for node in _statements(body):
            if isinstance(node, ast.ClassDef):
                qualname = f"{prefix}{node.name}"
                for name in sorted(
                    {
                        s.name
                        for s in _statements(node.body)
                        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name in self.names
                    }
                ):
                    self.definers.append((name, f"{self.module}.{qualname}"))
                self._calls_in(node, scopes, caller, None)
                self._block(node.body, scopes, f"{qualname}.", qualname)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._calls_in(node, scopes, caller, None)
                receiver = _first_parameter(node) if cls is not None and not _is_static(node) else None
                self._function(node, scopes, f"{prefix}{node.name}", cls, receiver)
            else:
                self._calls_in(node, scopes, caller, None)

    def _function(
        self,
        node: ast.FunctionDef | ast.AsyncFunctionDef,
        outer: Scopes,
        qualname: str,
        cls: str | None,
        receiver: str | None,
    ) -> None:
        own = self._bindings(node.body, False)
        own.update(dict.fromkeys(_arguments(node.args)))
        scopes = (*outer, own)
        for stmt in _statements(node.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._calls_in(stmt, scopes, qualname, (cls, receiver))
                # A closure still sees the method's ``self``: its calls through it stay the class's.
                self._function(stmt, scopes, f"{qualname}.<locals>.{stmt.name}", cls, receiver)
            elif isinstance(stmt, ast.ClassDef):
                self._calls_in(stmt, scopes, qualname, (cls, receiver))
                inner = f"{qualname}.<locals>.{stmt.name}"
                self._block(stmt.body, scopes, f"{inner}.", inner)
            else:
                self._calls_in(stmt, scopes, qualname, (cls, receiver))

    def _calls_in(self, node: ast.AST, scopes: Scopes, caller: str, method: Method | None) -> None:
        """The calls in a statement's own expressions (a def's or class's: its decorators, defaults, bases)."""
        parts: list[ast.AST]
        if isinstance(node, ast.ClassDef):
            parts = [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parts = [*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        else:
            parts = [node]
        for part in parts:
            for inner in _walk_expressions(part):
                if isinstance(inner, ast.Call):
                    self._call(inner, scopes, caller, method)

    def _call(self, node: ast.Call, scopes: Scopes, caller: str, method: Method | None) -> None:
        func: ast.expr = node.func
        call = signatures.call_of(node)
        if (path := self._path(func, scopes)) in _PARTIAL and node.args:
            func = node.args[0]
            partial = signatures.call_of(ast.Call(func, node.args[1:], node.keywords))
            call = Call(partial.positional, partial.keywords, True, True)  # the later call adds what it will
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if last not in self.names:
            return
        cls, receiver = method or (None, None)
        if isinstance(func, ast.Attribute):
            value = func.value
            if receiver is not None and cls is not None and _is_receiver(value, receiver):
                self.calls.append((last, CallOf(self.path, node.lineno, caller, SELF, f"{self.module}.{cls}", call)))
                return
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
                return
            base = self._path(value, scopes)
            if base is not None:
                self.calls.append((last, CallOf(self.path, node.lineno, caller, NAME, f"{base}.{last}", call)))
            elif not _names_something_known(value, scopes, self.top):
                self.calls.append((last, CallOf(self.path, node.lineno, caller, ATTR, "", call)))
            return
        path = self._path(func, scopes)
        if path is not None:
            self.calls.append((last, CallOf(self.path, node.lineno, caller, NAME, path, call)))

    def _path(self, expr: ast.expr, scopes: Scopes) -> str | None:
        """The dotted path ``expr`` names through the module's (and enclosing functions') imports and
        definitions; None for anything else (a local value, a parameter, a call's result)."""
        if isinstance(expr, ast.Attribute):
            inner = self._path(expr.value, scopes)
            return None if inner is None else f"{inner}.{expr.attr}"
        if not isinstance(expr, ast.Name):
            return None
        for scope in reversed(scopes):
            if expr.id in scope:
                return scope[expr.id]
        return self.top.get(expr.id)

    def _bindings(self, body: list[ast.stmt], top: bool) -> dict[str, str | None]:
        """What each name a scope binds stands for: an import's path, a module-level def's own; None for a
        value (a local, an assignment inside a function)."""
        out: dict[str, str | None] = {}
        for node in _statements(body):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        out[alias.asname] = alias.name
                    else:
                        out[alias.name.split(".")[0]] = alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(self.module, self.is_package, node.level, node.module)
                for alias in node.names:
                    if alias.name != "*":
                        out[alias.asname or alias.name] = f"{base}.{alias.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out[node.name] = f"{self.module}.{node.name}" if top else None
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With)):
                for target in _targets(node):
                    out.setdefault(target, f"{self.module}.{target}" if top else None)
        return out


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A block's statements and those of its nested blocks (``if``, ``try``, ``with``, loops), not of defs."""
    for node in body:
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                yield from _statements([s for s in inner if isinstance(s, ast.stmt)])
        for handler in getattr(node, "handlers", []):
            yield from _statements(handler.body)
        for case in getattr(node, "cases", []):
            yield from _statements(case.body)


def _walk_expressions(node: ast.AST) -> Iterator[ast.AST]:
    """The expressions of a statement (its own, not its nested blocks': those are statements of their own)."""
    if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        for field, value in ast.iter_fields(node):
            if field in ("body", "orelse", "finalbody", "handlers", "cases"):
                continue
            for part in value if isinstance(value, list) else [value]:
                if isinstance(part, ast.AST):
                    yield from ast.walk(part)
    else:
        yield from ast.walk(node)


def _targets(node: ast.stmt) -> Iterator[str]:
    if isinstance(node, ast.Assign):
        targets: list[ast.expr] = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, ast.With):
        targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
    else:
        targets = []
    for target in targets:
        for part in ast.walk(target):
            if isinstance(part, ast.Name):
                yield part.id


def _arguments(args: ast.arguments) -> Iterator[str]:
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            yield arg.arg


def _first_parameter(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    params = [*node.args.posonlyargs, *node.args.args]
    return params[0].arg if params else None


def _is_static(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)


def _is_receiver(value: ast.expr, receiver: str) -> bool:
    """``self`` (or ``cls``), or ``type(self)``: what the method was called on."""
    if isinstance(value, ast.Name):
        return value.id == receiver
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "type"
        and len(value.args) == 1
        and isinstance(value.args[0], ast.Name)
        and value.args[0].id == receiver
    )


def _names_something_known(value: ast.expr, scopes: Scopes, top: dict[str, str | None]) -> bool:
    """``value`` starts at a name bound to something outside vLLM's values (a module outside vLLM, a builtin
    type): its method is not the class's (``np.mean``, ``str.join``)."""
    while isinstance(value, ast.Attribute):
        value = value.value
    if isinstance(value, ast.Constant):
        return True
    if not isinstance(value, ast.Name):
        return False
    for scope in reversed(scopes):
        if value.id in scope:
            bound = scope[value.id]
            return bound is not None and not (bound == "vllm" or bound.startswith("vllm."))
    bound = top.get(value.id)
    return bound is not None and not (bound == "vllm" or bound.startswith("vllm."))


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    if not level:
        return target or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join([*parts, *([target] if target else [])])

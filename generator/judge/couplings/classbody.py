"""What one class body says of itself, read from its own statements: what ``sites`` reads of the tree's
classes and ``inherited`` of vLLM's, in one place.

Its statements (those under ``if``/``try`` too), the names each binds, its decorators, the fields the
``__init__`` a dataclass or a NamedTuple generates takes, and the attributes a method sets and reads on
its first parameter (``self``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

NAMED_TUPLE = ("NamedTuple", "typing.NamedTuple")


def class_statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """A class body's own statements, those under ``if``/``try`` included."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try)):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for inner in getattr(stmt, block, []):
                    yield from class_statements(getattr(inner, "body", [inner]) if block == "handlers" else [inner])


def decorator_names(node: ast.AST) -> list[str]:
    out = []
    for decorator in getattr(node, "decorator_list", []):
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name):
            out.append(target.id)
        elif isinstance(target, ast.Attribute):
            out.append(target.attr)
    return out


def bound_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def self_assigned(method: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """``<first parameter>.<name> = ...`` (plain, annotated, augmented, in a tuple) anywhere in the method's
    body; ``self.x[i] = ...`` and ``self.x.y = ...`` set nothing named ``x``."""
    params = [*method.args.posonlyargs, *method.args.args]
    if not params:
        return set()
    receiver, out = params[0].arg, set()
    for node in ast.walk(method):
        if isinstance(node, ast.Assign):
            targets: list[ast.expr] = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for part in ast.walk(target) if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == receiver:
                    out.add(part.attr)
    return out


def self_read(method: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, int]:
    """``<first parameter>.<name>`` read (not assigned) anywhere in the method's body, each with the first line
    that reads it."""
    params = [*method.args.posonlyargs, *method.args.args]
    if not params:
        return {}
    receiver = params[0].arg
    out: dict[str, int] = {}
    for node in ast.walk(method):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.value, ast.Name)
            and node.value.id == receiver
        ):
            out[node.attr] = min(out.get(node.attr, node.lineno), node.lineno)
    return out


Field = tuple[str, bool | None, bool | None]  # (name, has a default, keyword-only); None, None: init=False


def merge_fields(layers: Sequence[Sequence[Field]]) -> list[tuple[str, bool, bool]]:
    """The fields a generated ``__init__`` takes from each class's own (``own_fields``), the bases' first: a
    field redefined keeps its place, one ``field(init=False)`` drops it."""
    out: dict[str, tuple[str, bool, bool]] = {}
    for layer in layers:
        for name, default, kw in layer:
            if default is None or kw is None:
                out.pop(name, None)
            else:
                out[name] = (name, default, kw)
    return list(out.values())


def own_fields(cls: ast.ClassDef, kw_only: bool = False) -> list[Field] | None:
    """(name, has a default, keyword-only) of each field a class's own body adds to a generated ``__init__``,
    in order (a field ``field(init=False)`` leaves out is ``(name, None, None)``: it drops an inherited one);
    None when the class generates no ``__init__`` (not a dataclass nor a NamedTuple)."""
    if not generates_init(cls):
        return None
    kw_only = kw_only or bool(decorator_option(cls, "kw_only"))
    out: list[Field] = []
    for stmt in class_statements(cls.body):
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        annotation = ast.unparse(stmt.annotation)
        if "ClassVar" in annotation:  # not a field
            continue
        if annotation.endswith("KW_ONLY"):  # the sentinel: the fields after it are keyword-only
            kw_only = True
            continue
        default, in_init, own_kw = field_options(stmt.value)
        out.append(
            (stmt.target.id, default, own_kw if own_kw is not None else kw_only)
            if in_init
            else (stmt.target.id, None, None)
        )
    return out


def field_options(value: ast.expr | None) -> tuple[bool, bool, bool | None]:
    """(has a default, is an ``__init__`` parameter, keyword-only if ``field()`` says) of a field's value."""
    if value is None:
        return False, True, None
    call = value if isinstance(value, ast.Call) else None
    func = call.func if call is not None else None
    named = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if call is None or named != "field":
        return True, True, None
    options = {k.arg: k.value for k in call.keywords if k.arg}
    default = "default" in options or "default_factory" in options
    off = options.get("init")
    init = not (isinstance(off, ast.Constant) and off.value is False)
    kw = options.get("kw_only")
    return default, init, kw.value if isinstance(kw, ast.Constant) and isinstance(kw.value, bool) else None


def decorator_option(cls: ast.ClassDef, option: str) -> object:
    """The constant a class decorator's call passes as ``option`` (``@dataclass(kw_only=True)``); None if none."""
    for decorator in cls.decorator_list:
        if isinstance(decorator, ast.Call):
            for keyword in decorator.keywords:
                if keyword.arg == option and isinstance(keyword.value, ast.Constant):
                    return keyword.value.value
    return None


def generates_init(cls: ast.ClassDef) -> bool:
    if any(ast.unparse(b) in NAMED_TUPLE for b in cls.bases):
        return True
    return "dataclass" in decorator_names(cls) and decorator_option(cls, "init") is not False

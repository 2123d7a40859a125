"""Where one of the tree's functions sends its parameters on, as ``follow`` reads its body.

A call goes to B's function (``super().f(...)`` in a class deriving from a vLLM class, ``Base.f(self, ...)``
of a vLLM class, the original the file saved: ``_orig = vllm.x.f``), to a function of the file itself (a
base class's method of the file, its class's ``__init__``: what it takes is read, after this run's edits),
to a vLLM class's constructor (``constructs``: its ``__init__`` at B takes the parameter and A's did not, as
B changed the function), or somewhere not known. A keyword dict (``dict(a=a)``, ``{"a": a}``, filled with
``d["a"] = a``) goes where the calls spreading it (``**d``) go. What is not known takes nothing: a parameter
is never sent where it may not be taken, and never renamed or dropped in a call that may not be B's.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import libcst as cst

from generator.tree.adapt.cstedits import (
    Edits,
    add_keyword,
    drop_key,
    drop_keyword,
    rename_key,
    rename_keyword,
)


def param_names(ps: cst.Parameters) -> set[str]:
    return {p.name.value for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params)}


B = "B"  # a call that reaches B's own function


@dataclass(frozen=True)
class Context:
    """What the file says about where a function's calls go."""

    callee: str  # the name of B's function the tree's function stands in for (``__init__``, ``f``)
    cls: cst.ClassDef | None  # the function's class in the file (None: a module's function)
    originals: frozenset[str]  # the file's top-level names saving B's function
    vllm: Mapping[str, str]  # the file's top-level names imported from vLLM, by the dotted path they import
    classes: Mapping[str, cst.ClassDef]  # the file's own top-level classes
    # (class, method) of the file followed in this run: the parameters it takes after (None: any keyword)
    taken: Mapping[tuple[str, str], frozenset[str] | None]
    lookup: Lookup  # what B defines for the file's vLLM names
    b_name: str  # B's function, by its canonical name (``vllm.x.Cls.f``)


class Lookup(Protocol):
    """What B (and A) define for a vLLM name a file imports (``signatures.Lookup``)."""

    def newly(self, dotted: str, parameter: str) -> bool:
        """Does the vLLM class ``dotted`` take ``parameter`` in its ``__init__`` at B and not at A."""
        ...

    def reaches(self, dotted: str, method: str) -> str | None:
        """The canonical name of the ``method`` the vLLM class ``dotted`` has at B (its own or a base's)."""
        ...


# Where a call goes: B (B's function), a frozenset (a function of the file taking these), None (any keyword),
# ("class", name) (a vLLM class's constructor), or "" (not known).
Destination = str | frozenset[str] | None | tuple[str, str]
_UNKNOWN = ""


class Reader:
    """One function's own body as forwarding reads it: its calls of what it wraps, its keyword dicts."""

    def __init__(self, fn: cst.FunctionDef, context: Context) -> None:
        self.fn = fn
        self.own = param_names(fn.params)
        self.any_keyword = fn.params.star_kwarg is not None
        self.first = next((p.name.value for p in (*fn.params.posonly_params, *fn.params.params)), "")
        body = _Body()
        fn.body.visit(body)
        self.body = body
        self.context = context

    def reads(self, name: str) -> list[cst.Name]:
        return [n for n in self.body.names if n.value == name]

    def _goes_to(self, call: cst.Call) -> Destination:
        func, ctx = call.func, self.context
        if isinstance(func, cst.Attribute) and func.attr.value == ctx.callee:
            inner = func.value
            if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "super":
                bases = ctx.cls.bases if ctx.cls is not None else ()
                return self._method_of(bases[0].value, ctx.callee, 0) if bases else _UNKNOWN
            first = call.args[0].value if call.args else None
            if isinstance(first, cst.Name) and first.value == self.first and self.first in ("self", "cls"):
                return self._method_of(inner, ctx.callee, 0)
        if isinstance(func, cst.Name):
            if func.value in ctx.originals:
                return B
            if func.value in ctx.classes:  # the file's class: only one whose ``__init__`` this run follows
                return ctx.taken.get((func.value, "__init__"), _UNKNOWN)
            if func.value in ctx.vllm and func.value[:1].isupper():
                return ("class", ctx.vllm[func.value])
        return _UNKNOWN

    def _method_of(self, cls: cst.BaseExpression, method: str, depth: int) -> Destination:
        """Where ``cls.method`` is: B's (a vLLM class), the file's own (what it takes), or not known."""
        name = cst.Module(body=[]).code_for_node(cls)
        ctx = self.context
        head, _, rest = name.partition(".")
        if head in ctx.vllm and name not in ctx.classes:
            dotted = f"{ctx.vllm[head]}.{rest}" if rest else ctx.vllm[head]
            return B if ctx.lookup.reaches(dotted, method) == ctx.b_name else _UNKNOWN
        own = ctx.classes.get(name)
        if own is None or depth > 8:
            return _UNKNOWN
        if (name, method) in ctx.taken:
            return ctx.taken[(name, method)]
        found = _method(own, method)
        if found is not None:
            return None if found.params.star_kwarg is not None else frozenset(param_names(found.params))
        return self._method_of(own.bases[0].value, method, depth + 1) if own.bases else _UNKNOWN

    def _takes(self, call: cst.Call, name: str) -> bool:
        where = self._goes_to(call)
        if where == B or where is None:
            return True
        if isinstance(where, frozenset):
            return name in where
        if isinstance(where, tuple):
            return self.context.lookup.newly(where[1], name)
        return False

    def _to_b(self, call: cst.Call) -> bool:
        return self._goes_to(call) == B

    def _where(self, call: cst.Call) -> str:
        return cst.Module(body=[]).code_for_node(call.func) + "(...)"

    def _carriers(self) -> list[tuple[str, cst.Call | str]]:
        """What the function forwards through: its calls of what it wraps (a call) and its keyword dicts (a
        dict's name), each once. A constructor it calls counts when it passes one of the function's own
        parameters on by keyword (``BlockPool(enable_caching=enable_caching)``)."""
        out: list[tuple[str, cst.Call | str]] = []
        spread = {d for call in self.body.calls for d in _spread(call)}
        for call in self.body.calls:
            where = self._goes_to(call)
            if where == _UNKNOWN or any(d in self.body.dicts for d in _spread(call)):
                continue  # not known; or it forwards through its keyword dict: the dict is the carrier
            if where != B and not self._passes_own(keywords_of_call(call)):
                continue
            out.append(("call", call))
        for name in sorted(spread & set(self.body.dicts)):
            if self._passes_own(self._dict_keys(name)):
                out.append(("dict", name))
        return out

    def _passes_own(self, keys: Mapping[str, cst.BaseExpression]) -> bool:
        return any(isinstance(v, cst.Name) and v.value == k and k in self.own for k, v in keys.items())

    def _dict_keys(self, name: str) -> dict[str, cst.BaseExpression]:
        value = self.body.dicts[name]
        keys = keywords_of_call(value) if isinstance(value, cst.Call) else _keys_of_dict(value)
        for store_name, key, _, assign in self.body.stores:
            if store_name == name:
                keys[key] = assign.value
        return keys

    def _destinations(self, name: str) -> list[cst.Call]:
        return [call for call in self.body.calls if name in _spread(call)]

    def forward(self, name: str, default: tuple[str, str], edits: Edits) -> tuple[list[str], list[str]]:
        """``name`` forwarded by keyword through every carrier whose destinations take it, when it is not B's
        default (``default``: the tests true at it and off it): what the function wraps is called at the default
        exactly as at A (a test's fake of A's shape in its place too). (Where it went, where it did not: a
        destination that does not take it.)"""
        went, not_to = [], []
        for kind, carrier in self._carriers():
            if kind == "call":
                assert isinstance(carrier, cst.Call)
                if not self._takes(carrier, name):
                    not_to.append(self._where(carrier))
                    continue
                if name in keywords_of_call(carrier) or _spread(carrier) or _double_star(carrier):
                    continue
                edits.calls.setdefault(id(carrier), []).append(add_keyword(name, default[0]))
                went.append(self._where(carrier))
                continue
            assert isinstance(carrier, str)
            destinations = self._destinations(carrier)
            refusing = [d for d in destinations if not self._takes(d, name)]
            if refusing or not destinations:
                not_to += [f"{carrier} (to {self._where(d)})" for d in refusing]
                continue
            if name in self._dict_keys(carrier):
                continue
            self._add_to_dict(carrier, name, default[1], edits)
            went.append(f"{carrier} (to {', '.join(self._where(d) for d in destinations)})")
        return went, not_to

    def _add_to_dict(self, name: str, param: str, off_default: str, edits: Edits) -> None:
        """``if <param is not B's default>: d["param"] = param``, after the last line filling the dict (or the
        one making it)."""
        stores = [s for s in self.body.stores if s[0] == name]
        line = stores[-1][2] if stores else self.body.dict_lines[name]
        q = _key_node(stores[-1][3]).value[-1] if stores else '"'
        statement = cst.parse_statement(f"if {off_default}:\n    {name}[{q}{param}{q}] = {param}\n")
        edits.after.setdefault(id(line), []).append(statement)

    def rename_forward(self, old: str, new: str, edits: Edits) -> list[str]:
        """Where ``old`` goes to B's function by keyword, it goes as ``new``."""
        out = []
        for kind, carrier in self._carriers():
            if kind == "call":
                assert isinstance(carrier, cst.Call)
                if self._to_b(carrier) and old in keywords_of_call(carrier):
                    edits.calls.setdefault(id(carrier), []).append(rename_keyword(old, new))
                    out.append(f"passes {new}= to {self._where(carrier)}")
            elif isinstance(carrier, str) and self._to_b_only(carrier) and old in self._dict_keys(carrier):
                self._rename_in_dict(carrier, old, new, edits)
                out.append(f"passes {new} in {carrier}")
        return out

    def drop_forward(self, name: str, edits: Edits) -> tuple[list[str], str]:
        """``name`` no longer passed to B's function by keyword; (what was dropped, a positional pass left)."""
        out, positional = [], ""
        for kind, carrier in self._carriers():
            if kind == "call":
                assert isinstance(carrier, cst.Call)
                if not self._to_b(carrier):
                    continue
                if name in keywords_of_call(carrier):
                    edits.calls.setdefault(id(carrier), []).append(drop_keyword(name))
                    out.append(f"no longer passes {name} (B removed it) to {self._where(carrier)}")
                elif any(
                    a.keyword is None and isinstance(a.value, cst.Name) and a.value.value == name for a in carrier.args
                ):
                    positional = self._where(carrier)
            elif isinstance(carrier, str) and self._to_b_only(carrier) and name in self._dict_keys(carrier):
                self._drop_from_dict(carrier, name, edits)
                out.append(f"no longer passes {name} (B removed it) in {carrier}")
        return out, positional

    def _to_b_only(self, name: str) -> bool:
        destinations = self._destinations(name)
        return bool(destinations) and all(self._to_b(d) for d in destinations)

    def _rename_in_dict(self, name: str, old: str, new: str, edits: Edits) -> None:
        for store_name, key, _, assign in self.body.stores:
            if store_name == name and key == old:
                string = _key_node(assign)
                edits.strings[id(string)] = string.value.replace(old, new)
        value = self.body.dicts[name]
        if isinstance(value, cst.Call):
            edits.calls.setdefault(id(value), []).append(rename_keyword(old, new))
        else:
            edits.dicts.setdefault(id(value), []).append(rename_key(old, new))

    def _drop_from_dict(self, name: str, key: str, edits: Edits) -> None:
        for store_name, found, line, _ in self.body.stores:
            if store_name == name and found == key:
                edits.drop.add(id(line))
        value = self.body.dicts[name]
        if isinstance(value, cst.Call):
            edits.calls.setdefault(id(value), []).append(drop_keyword(key))
        else:
            edits.dicts.setdefault(id(value), []).append(drop_key(key))


class _Body(cst.CSTVisitor):
    """A function's own body: its calls, keyword dicts, ``d["k"] = v`` stores and the names it reads (a
    nested def, class or lambda is its own scope: not read)."""

    def __init__(self) -> None:
        self.calls: list[cst.Call] = []
        self.dicts: dict[str, cst.Call | cst.Dict] = {}
        self.dict_lines: dict[str, cst.SimpleStatementLine] = {}  # the line making each dict
        self.twice: set[str] = set()
        self.stores: list[tuple[str, str, cst.SimpleStatementLine, cst.Assign]] = []
        self.names: list[cst.Name] = []
        self._line: cst.SimpleStatementLine | None = None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._line = node

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # the attribute's own name is not a variable
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # a keyword's name is not a variable
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        self._bind(node.targets[0].target, node.value, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and isinstance(node.target, cst.Name):
            self._bind(node.target, node.value, None)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression, assign: cst.Assign | None) -> None:
        if isinstance(target, cst.Name):
            if target.value in self.dicts or target.value in self.twice:
                self.dicts.pop(target.value, None)
                self.twice.add(target.value)  # bound twice: which dict a call spreads is not known
            elif _is_keyword_dict(value) and self._line is not None:
                assert isinstance(value, (cst.Call, cst.Dict))
                self.dicts[target.value] = value
                self.dict_lines[target.value] = self._line
        elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and assign is not None:
            key = _string_key(target)
            if key is not None and self._line is not None:
                self.stores.append((target.value.value, key, self._line, assign))


def _is_keyword_dict(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Call):
        return (
            isinstance(value.func, cst.Name)
            and value.func.value == "dict"
            and all(a.keyword is not None for a in value.args)
        )
    return isinstance(value, cst.Dict) and all(
        isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) for e in value.elements
    )


def _key_node(assign: cst.Assign) -> cst.SimpleString:
    """The string key of a ``d["k"] = v`` the body's ``stores`` hold."""
    target = assign.targets[0].target
    assert isinstance(target, cst.Subscript)
    index = target.slice[0].slice
    assert isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString)
    return index.value


def _string_key(target: cst.Subscript) -> str | None:
    if len(target.slice) != 1:
        return None
    index = target.slice[0].slice
    if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
        found = index.value.evaluated_value
        return found if isinstance(found, str) else None
    return None


def _spread(call: cst.Call) -> list[str]:
    return [a.value.value for a in call.args if a.star == "**" and isinstance(a.value, cst.Name)]


def _double_star(call: cst.Call) -> bool:
    return any(a.star == "**" for a in call.args)


def keywords_of_call(call: cst.Call) -> dict[str, cst.BaseExpression]:
    return {a.keyword.value: a.value for a in call.args if a.keyword is not None}


def _keys_of_dict(value: cst.Dict) -> dict[str, cst.BaseExpression]:
    out: dict[str, cst.BaseExpression] = {}
    for e in value.elements:
        if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString):
            key = e.key.evaluated_value
            if isinstance(key, str):
                out[key] = e.value
    return out


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)


def _saved_name(value: ast.expr) -> str | None:
    if isinstance(value, ast.Attribute):
        return value.attr
    if isinstance(value, ast.Call) and len(value.args) >= 2 and isinstance(value.args[1], ast.Constant):
        found = value.args[1].value
        return found if isinstance(found, str) else None
    return None


def saved_originals(tree: ast.Module, callee: str) -> set[str]:
    """The file's top-level names that save the vLLM function named ``callee`` (``_orig = vllm.x.callee``,
    ``getattr(X, "callee")``, ``from vllm.x import callee as _orig``), none the file itself defines."""
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if _saved_name(node.value) == callee:
                out.add(node.targets[0].id)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vllm"):
            out |= {a.asname for a in node.names if a.name == callee and a.asname}
    return out - defined

"""Test-only pytest plugin of `make downstream-suite --peel`: stand-ins ("tombstones") for vLLM names gone at B.

Loaded with ``-p balance_suite_peel`` (before the tree's conftest), it reads $BALANCE_SUITE_PEELS, a JSON
file ``{"peels": [{"module": "vllm.a.b"}, {"module": "vllm.a", "name": "X"}], "uses": FILE}`` the harness
wrote from Python's own import errors, and installs, by a meta-path finder, nothing else:

- a gone module (``No module named 'vllm.a.b'``): a stand-in package whose every public name is a stand-in;
- a gone name (``cannot import name 'X' from 'vllm.a'``): vLLM's real module, loaded as always, then a
  module ``__getattr__`` (PEP 562) serving ``X`` (and the module's own ``__getattr__`` for the rest).

A stand-in is a class, so modules that import it, subclass it or decorate with it load. While pytest
collects (their conftest and test modules import), using one (an attribute, a call, a subscript) gives
another stand-in of the same name, counted in FILE with where it happened; once collection is over every
use raises ``GoneAtB: vllm.a.X is not in vLLM B (peeled; imported at path:line, used: ...)``, as does
importing a gone name then. No file of the tree or of vLLM is touched. Only the standard library is used.
"""

from __future__ import annotations

import abc
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import types
from collections import Counter
from pathlib import Path
from typing import Any

PEELS_ENV = "BALANCE_SUITE_PEELS"
HERE = os.path.abspath(__file__)
PROBES = ("__", "_pytest", "_fixture", "_mock", "pytest_")  # names tools look up on any object they meet
MAX_VIA = 80  # characters of the use chain a message keeps


class GoneAtB(Exception):  # the message's first word: what a reader greps a report for
    """A test used a vLLM name vLLM B does not have (its import was peeled to run past it)."""


_state: dict[str, Any] = {"collecting": True, "root": os.getcwd(), "uses": None}
_used: Counter[tuple[str, str, str, str]] = Counter()  # (name, imported at, use, where) while collecting
_stand_ins: dict[tuple[str, str, str], type] = {}


def _where(skip: int) -> str:
    """``path:line`` of the first caller outside this file and importlib (the importing statement)."""
    frame = sys._getframe(skip)
    while frame is not None and (frame.f_code.co_filename == HERE or "importlib" in frame.f_code.co_filename):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "?:0"
    name = frame.f_code.co_filename
    if "site-packages/" in name:
        name = name.rsplit("site-packages/", 1)[1]
    else:
        with contextlib.suppress(ValueError):  # outside the tree and site-packages: the path as it is
            name = Path(name).resolve().relative_to(_state["root"]).as_posix()
    return f"{name}:{frame.f_lineno}"


def _message(name: str, site: str, via: str) -> str:
    used = f", used: {via[:MAX_VIA]}" if via else ""
    return f"{name} is not in vLLM B (peeled; imported at {site}{used})"


def _use(cls: type, how: str) -> type:
    name, site = cls._gone_name, cls._gone_site  # type: ignore[attr-defined]
    own = "_gone_name" in cls.__dict__  # the stand-in itself, or a class of the tree deriving from one
    via = (cls.__dict__["_gone_via"] if own else f"subclass {cls.__qualname__}") + how
    if not _state["collecting"]:
        raise GoneAtB(_message(name, site, via))
    _used[(name, site, via[:MAX_VIA], _where(1))] += 1
    return stand_in(name, site, via[:MAX_VIA])


class _Gone(abc.ABCMeta):
    """The stand-ins' metaclass: what a class of a gone name does when used (see the module's docstring).

    An ``ABCMeta``: vLLM's bases are mostly ABCs, and a class of the tree deriving from a stand-in and from
    one of them needs a metaclass deriving from both (``type`` alone is a metaclass conflict).
    """

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith(PROBES):  # Python's, pytest's and mock's probes: plainly absent
            gone = cls._gone_name
            raise AttributeError(f"stand-in for {gone} (not in vLLM B) has no attribute {attr!r}")
        return _use(cls, f".{attr}")

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return _use(cls, "()")

    def __getitem__(cls, key: Any) -> Any:
        return _use(cls, "[]")

    def __iter__(cls) -> Any:
        _use(cls, " iterated")
        return iter(())

    def __repr__(cls) -> str:
        if "_gone_name" not in cls.__dict__:
            return type.__repr__(cls)
        return f"<stand-in for {cls.__dict__['_gone_name']}, not in vLLM B>"


def stand_in(name: str, site: str, via: str = "") -> type:
    """The stand-in for ``name`` imported at ``site`` (one object per name, site and use chain)."""
    key = (name, site, via)
    if key not in _stand_ins:
        short = name.rsplit(".", 1)[-1]
        body = {"_gone_name": name, "_gone_site": site, "_gone_via": via, "__module__": name.rpartition(".")[0]}
        _stand_ins[key] = _Gone(short, (), body)
    return _stand_ins[key]


def served(name: str) -> type:
    """What importing a gone ``name`` gives: a stand-in while collecting, GoneAtB in a test."""
    site = _where(1)
    if not _state["collecting"]:
        raise GoneAtB(_message(name, site, ""))
    return stand_in(name, site)


def _gone_names(module: types.ModuleType, names: frozenset[str]) -> None:
    previous = module.__dict__.get("__getattr__")
    prefix = module.__name__

    def __getattr__(attr: str) -> Any:
        if attr in names:
            return served(f"{prefix}.{attr}")
        if previous is not None:
            return previous(attr)
        raise AttributeError(f"module {prefix!r} has no attribute {attr!r}")

    module.__getattr__ = __getattr__  # type: ignore[method-assign]


class _GoneModuleLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        prefix = module.__name__

        def __getattr__(attr: str) -> Any:
            if attr.startswith("__"):
                raise AttributeError(attr)
            return served(f"{prefix}.{attr}")

        module.__getattr__ = __getattr__  # type: ignore[method-assign]


class _ThenNames(importlib.abc.Loader):
    """vLLM's own loader, then the gone names served by the module's ``__getattr__``."""

    def __init__(self, real: Any, names: frozenset[str]) -> None:
        self.real, self.names = real, names

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        module: types.ModuleType | None = self.real.create_module(spec)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__loader__ = self.real
        if module.__spec__ is not None:
            module.__spec__.loader = self.real
        self.real.exec_module(module)
        _gone_names(module, self.names)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, modules: frozenset[str], names: dict[str, frozenset[str]]) -> None:
        self.modules, self.names = modules, names

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname in self.modules:
            return importlib.util.spec_from_loader(fullname, _GoneModuleLoader(), is_package=True)
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _ThenNames(spec.loader, self.names[fullname])
                return spec
        return None


def install(peels: list[dict[str, str]]) -> None:
    modules = frozenset(p["module"] for p in peels if not p.get("name"))
    grouped: dict[str, set[str]] = {}
    for peel in peels:
        if peel.get("name"):
            grouped.setdefault(peel["module"], set()).add(peel["name"])
    names = {module: frozenset(found) for module, found in grouped.items()}
    for module, found in names.items():
        if module in sys.modules:  # imported before this plugin (by another plugin): serve the names now
            _gone_names(sys.modules[module], found)
    sys.meta_path.insert(0, _Finder(modules, names))


def _load() -> None:
    target = os.environ.get(PEELS_ENV)
    if not target:
        return
    spec = json.loads(Path(target).read_text(encoding="utf-8"))
    _state["uses"] = spec.get("uses")
    install(list(spec.get("peels", [])))


def pytest_configure(config: Any) -> None:
    _state["root"] = Path(str(config.rootpath)).resolve()


def pytest_collection_finish(session: Any) -> None:
    """Collection is over: from here on a stand-in is a gone name, and what it absorbed is written down."""
    _state["collecting"] = False
    if _state["uses"]:
        rows = [
            {"name": name, "imported_at": site, "use": via, "where": where, "count": count}
            for (name, site, via, where), count in sorted(_used.items())
        ]
        Path(_state["uses"]).write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), "utf-8")


_load()

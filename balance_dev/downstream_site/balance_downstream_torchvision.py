"""Test-only import guard of `make downstream`, copied into the downstream venv (never into a package).

The only torchvision on the package index that pairs with the CPU build of torch is a CUDA build: its C++
ops do not load next to CPU torch, so ``torchvision::nms`` and ``qnms`` do not exist, and the two
``torch.library.register_fake`` calls in ``torchvision._meta_registrations`` raise at import. vLLM's model
registry (which vllm-ascend's conftest reaches) imports torchvision, so every test would fail to collect.
This guard skips exactly those two registrations, and only while they name an op that does not exist.

A ``.pth`` line imports this module at interpreter start; it imports nothing heavy (torch stays unimported
until torchvision itself imports it) and patches ``register_fake`` only while that one module executes.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

TARGET = "torchvision._meta_registrations"
GUARDED_OPS = frozenset({"torchvision::nms", "torchvision::qnms"})


def _op_exists(qualname: str) -> bool:
    import torch

    namespace, _, name = qualname.partition("::")
    try:
        getattr(getattr(torch.ops, namespace), name)
    except (AttributeError, RuntimeError):
        return False
    return True


def _guarded(register_fake: Callable[..., Any]) -> Callable[..., Any]:
    def register(op: Any, func: Any = None, /, **kwargs: Any) -> Any:
        if op in GUARDED_OPS and not _op_exists(op):
            # Nothing to fake: the op was never registered. Hand the function back unregistered.
            return func if func is not None else (lambda f: f)
        return register_fake(op, func, **kwargs)

    return register


class _GuardLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        import torch.library

        original = torch.library.register_fake
        torch.library.register_fake = _guarded(original)
        try:
            self.inner.exec_module(module)
        finally:
            torch.library.register_fake = original


class _GuardFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _GuardLoader(spec.loader)
                return spec
        return None


def install() -> None:
    if not any(isinstance(finder, _GuardFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _GuardFinder())


install()

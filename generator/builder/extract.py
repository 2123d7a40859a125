"""Find ``class Scheduler`` -> ``def schedule`` in upstream's module, with libcst."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst

from generator.errors import UpstreamShapeError
from generator.sources.base import UPSTREAM_PATH

CLASS_NAME = "Scheduler"
METHOD_NAME = "schedule"


@dataclass(frozen=True)
class Extracted:
    module: cst.Module
    cls: cst.ClassDef
    method: cst.FunctionDef


def parse(text: str, tag: str) -> cst.Module:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise UpstreamShapeError(
            f"upstream {UPSTREAM_PATH} at {tag} does not parse ({exc.message}): is it Python?"
        ) from None


def extract(module: cst.Module, tag: str, class_name: str = CLASS_NAME, method_name: str = METHOD_NAME) -> Extracted:
    classes = [s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == class_name]
    if len(classes) != 1:
        raise UpstreamShapeError(
            f"expected one top-level class {class_name} in {UPSTREAM_PATH} at {tag}, found {len(classes)}: "
            "the generator must be taught where the scheduler moved"
        )
    cls = classes[0]
    methods = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == method_name]
    if len(methods) != 1:
        raise UpstreamShapeError(
            f"expected one {class_name}.{method_name} at {tag}, found {len(methods)}: "
            "the generator must be taught the new shape"
        )
    return Extracted(module=module, cls=cls, method=methods[0])


def top_level(module: cst.Module) -> ast.Module:
    """Upstream's top level as an ``ast`` tree, each top-level class and function reduced to its name.

    Only what the top level binds is read from it (imports, names, ``__future__``); the bodies
    of the classes are nearly all of the file and would double the cost of ``ast`` parsing it.
    """
    parts = []
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef):
            parts.append(f"class {stmt.name.value}: pass")
        elif isinstance(stmt, cst.FunctionDef):
            parts.append(f"def {stmt.name.value}(): pass")
        else:
            parts.append(module.code_for_node(stmt))
    return ast.parse("\n".join(parts))

"""Find ``class Scheduler`` -> ``def schedule`` in upstream's module, with libcst."""

from __future__ import annotations

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


def extract(module: cst.Module, tag: str) -> Extracted:
    classes = [s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == CLASS_NAME]
    if len(classes) != 1:
        raise UpstreamShapeError(
            f"expected one top-level class {CLASS_NAME} in {UPSTREAM_PATH} at {tag}, found {len(classes)}: "
            "the generator must be taught where the scheduler moved"
        )
    cls = classes[0]
    methods = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == METHOD_NAME]
    if len(methods) != 1:
        raise UpstreamShapeError(
            f"expected one {CLASS_NAME}.{METHOD_NAME} at {tag}, found {len(methods)}: "
            "the generator must be taught the new shape"
        )
    return Extracted(module=module, cls=cls, method=methods[0])

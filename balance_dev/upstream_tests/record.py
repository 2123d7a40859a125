"""A stable serialization of ``schedule()``'s output, and the comparison of two runs' records.

``serialize`` turns a ``SchedulerOutput`` into JSON values the moment ``schedule()`` returns it (the
caller mutates it later): dataclass and msgspec fields by name in declaration order, dicts as ordered
``[key, value]`` pairs (their order is the scheduling order), sets sorted, enums by name, tensors and
arrays by dtype, shape and values (tensors by dtype and shape: their values are the tests' uninitialized
inputs, passed through), mocks by type only, and anything else by its type and attributes
(memory addresses removed), so two runs that scheduled the same thing serialize to the same JSON.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 12
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _type_name(obj: object) -> str:
    return type(obj).__qualname__


def serialize(obj: Any, depth: int = 0, active: frozenset[int] = frozenset()) -> Any:
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, enum.Enum):
        return f"{_type_name(obj)}.{obj.name}"
    if isinstance(obj, bytes):
        return {"bytes": obj.hex()}
    if depth >= MAX_DEPTH:
        return {"type": _type_name(obj), "truncated": True}
    if id(obj) in active:
        return {"type": _type_name(obj), "cycle": True}
    inner = active | {id(obj)}

    def each(value: Any) -> Any:
        return serialize(value, depth + 1, inner)

    module = type(obj).__module__
    if module.startswith("unittest.mock"):
        return {"mock": _type_name(obj)}
    if module.startswith("torch") and hasattr(obj, "tolist") and hasattr(obj, "shape"):
        # Inputs passed through by reference, never computed by the scheduler; the tests fill them with
        # uninitialized memory (MultiModalKwargsItem.dummy() is a torch.empty), so their values are noise.
        return {"tensor": str(obj.dtype), "shape": list(obj.shape)}
    if module.startswith("numpy") and hasattr(obj, "tolist"):
        return {"array": str(getattr(obj, "dtype", "")), "values": obj.tolist()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"type": _type_name(obj), **{f.name: each(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
    if (struct_fields := getattr(type(obj), "__struct_fields__", None)) is not None:  # msgspec.Struct
        return {"type": _type_name(obj), **{name: each(getattr(obj, name, None)) for name in struct_fields}}
    if isinstance(obj, Mapping):
        return {"dict": [[each(k), each(v)] for k, v in obj.items()]}
    if isinstance(obj, set | frozenset):
        return {"set": sorted((each(v) for v in obj), key=lambda v: json.dumps(v, sort_keys=True))}
    if isinstance(obj, list | tuple) or (isinstance(obj, Sequence) and not isinstance(obj, str)):
        return [each(v) for v in obj]
    attributes = getattr(obj, "__dict__", None)
    if isinstance(attributes, dict):
        return {"type": _type_name(obj), "attributes": {k: each(v) for k, v in sorted(attributes.items())}}
    return {"type": _type_name(obj), "repr": _ADDRESS.sub(" at 0x?", repr(obj))}


@dataclass(frozen=True)
class Difference:
    test: str
    what: str  # one line: which call differs and where


def first_difference(left: Any, right: Any, path: str = "") -> str | None:
    """The path of the first place two serialized values differ (``scheduled_new_reqs[0].req_id``), or None."""
    if type(left) is not type(right):
        return f"{path or '(top)'}: {_short(left)} != {_short(right)}"
    if isinstance(left, dict):
        for key in [*left, *(k for k in right if k not in left)]:
            if key not in left or key not in right:
                return f"{path}.{key}: only in {'the second' if key not in left else 'the first'}"
            if (found := first_difference(left[key], right[key], f"{path}.{key}" if path else key)) is not None:
                return found
        return None
    if isinstance(left, list):
        for i, (a, b) in enumerate(zip(left, right, strict=False)):
            if (found := first_difference(a, b, f"{path}[{i}]")) is not None:
                return found
        if len(left) != len(right):
            return f"{path}: {len(left)} items != {len(right)} items"
        return None
    return None if left == right else f"{path or '(top)'}: {_short(left)} != {_short(right)}"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def compare(
    reference: Mapping[str, Sequence[Any]], other: Mapping[str, Sequence[Any]], tests: Sequence[str] | None = None
) -> list[Difference]:
    """Every test whose ``schedule()`` outputs differ, in number, order or content (None: every test either has)."""
    names = list(tests) if tests is not None else sorted({*reference, *other})
    out = []
    for test in names:
        left, right = list(reference.get(test, [])), list(other.get(test, []))
        if left == right:
            continue
        for call, (a, b) in enumerate(zip(left, right, strict=False)):
            if (found := first_difference(a, b)) is not None:
                out.append(Difference(test, f"schedule() call {call + 1}: {found}"))
                break
        else:
            out.append(Difference(test, f"{len(left)} schedule() calls != {len(right)}"))
    return out

"""Upstream's own running-cap check, read from the installed vLLM's source: an oracle for tests and sims.

Independent of the generator: it reads ``Scheduler.schedule()`` of the vLLM that is running, with
the stdlib ``ast``, so a test can say "frozen iff upstream's own check would stop a rank at the
leader's count" without trusting what the generator copied.
"""

from __future__ import annotations

import ast
import inspect
import operator
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

_OPERATORS: dict[type[ast.cmpop], Callable[[int, int], bool]] = {
    ast.Eq: operator.eq,
    ast.GtE: operator.ge,
    ast.Gt: operator.gt,
}


@dataclass(frozen=True)
class UpstreamCap:
    compare: Callable[[int, int], bool]
    cap_attribute: str  # e.g. max_num_running_reqs, or max_num_active_reqs from 0.31 on

    def cap(self, scheduler: object) -> int:
        return int(getattr(scheduler, self.cap_attribute))

    def stops(self, scheduler: object, count: int) -> bool:
        """Would upstream's WAITING loop stop admitting on a rank with ``count`` slots taken?"""
        return self.compare(count, self.cap(scheduler))


@cache
def upstream_cap(upstream_cls: type) -> UpstreamCap:
    tree = ast.parse(textwrap.dedent(inspect.getsource(upstream_cls.schedule)))  # type: ignore[attr-defined]
    found = [
        node.test
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and [type(s) for s in node.body] == [ast.Break]
        and isinstance(node.test, ast.Compare)
        and len(node.test.ops) == 1
        and isinstance(limit := node.test.comparators[0], ast.Attribute)
        and limit.attr.startswith("max_num_")
    ]
    if len(found) != 1:
        raise AssertionError(f"expected one running-cap check in upstream schedule(), found {len(found)}")
    (test,) = found
    limit = test.comparators[0]
    assert isinstance(limit, ast.Attribute)
    return UpstreamCap(_OPERATORS[type(test.ops[0])], limit.attr)

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


SEAM_METHOD = "_should_stop_admitting_waiting"


def _conditions(tree: ast.AST) -> list[ast.expr]:
    """``if <c>: break`` tests and ``return <c>`` values: where a cap check can stand."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and [type(s) for s in node.body] == [ast.Break]:
            found.append(node.test)
        elif isinstance(node, ast.Return) and node.value is not None:
            found.append(node.value)
    return found


@cache
def upstream_cap(upstream_cls: type) -> UpstreamCap:
    # With the seam, the check is that method's return value instead of a test in the loop.
    where = getattr(upstream_cls, SEAM_METHOD, None) or upstream_cls.schedule  # type: ignore[attr-defined]
    found = [
        test
        for test in _conditions(ast.parse(textwrap.dedent(inspect.getsource(where))))
        if isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(limit := test.comparators[0], ast.Attribute)
        and limit.attr.startswith("max_num_")
    ]
    if len(found) != 1:
        raise AssertionError(f"expected one running-cap check in upstream {where.__name__}(), found {len(found)}")
    (test,) = found
    assert isinstance(test, ast.Compare)
    limit = test.comparators[0]
    assert isinstance(limit, ast.Attribute)
    return UpstreamCap(_OPERATORS[type(test.ops[0])], limit.attr)


def gathered_leader_value(scheduler: object, upstream_cls: type, leader_count: int) -> int:
    """What ``balance_gather()`` leaves in ``balance_leader_running`` when the leader has that many slots taken.

    The generated copy gathers upstream's count; the seam path gathers each rank's own verdict.
    """
    if hasattr(upstream_cls, SEAM_METHOD):
        return int(upstream_cap(upstream_cls).stops(scheduler, leader_count))
    return leader_count

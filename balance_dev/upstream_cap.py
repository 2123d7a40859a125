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
    """Where a cap check can stand: ``if <c>: break`` tests, ``return <c>`` values, and the parts of a mode
    flag ``<flag> = <c> or ...`` that admission is guarded by (``if not <flag>:``, 0.34's ``loads_only``)."""
    found: list[ast.expr] = []
    guards = {
        node.test.operand.id
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.UnaryOp)
        and isinstance(node.test.op, ast.Not)
        and isinstance(node.test.operand, ast.Name)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and [type(s) for s in node.body] == [ast.Break]:
            found.append(node.test)
        elif isinstance(node, ast.Return) and node.value is not None:
            found.append(node.value)
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in guards
        ):
            value = node.value
            found += value.values if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or) else [value]
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

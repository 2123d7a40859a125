"""Independent inverse check: generated ``schedule()`` minus the deltas equals upstream's.

Written against the stdlib ``ast`` with its own textual spec of each delta, sharing no code with
the libcst transforms in ``deltas.py``: a bug in one is caught by the other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from generator.errors import VerificationFailed

UPSTREAM_CLASS = "Scheduler"
METHOD = "schedule"

_GATE = "if max(t.item() for t in self.balance_queue) == self.max_num_running_reqs:\n    break\n"
_CAP_BREAK = (
    "if len(self.running) == self.max_num_running_reqs:\n    break\n",
    "if len(self.running) >= self.max_num_running_reqs:\n    break\n",
)
_QUEUE_BREAK = "if request_queue is None:\n    break\n"
_QUEUE_ASSERT = "assert request_queue is not None\n"


def _dump(node: ast.AST) -> str:
    return ast.dump(node, include_attributes=False)


def _spec(code: str) -> str:
    return _dump(ast.parse(code).body[0])


def _stmt_lists(node: ast.AST) -> Iterator[list[ast.stmt]]:
    for child in ast.walk(node):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(child, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def _find(func: ast.FunctionDef, spec: str) -> list[tuple[list[ast.stmt], int]]:
    return [(block, i) for block in _stmt_lists(func) for i, s in enumerate(block) if _dump(s) == spec]


def _method(tree: ast.Module, class_name: str | None) -> ast.FunctionDef:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and (class_name is None or n.name == class_name)]
    methods = [n for c in classes for n in c.body if isinstance(n, ast.FunctionDef) and n.name == METHOD]
    if len(methods) != 1:
        where = f"class {class_name}" if class_name else "the generated classes"
        raise VerificationFailed(f"expected one {METHOD}() in {where}, found {len(methods)}: run `make regen`")
    return methods[0]


def _forwarding_spec(up: ast.FunctionDef) -> str:
    a = up.args
    args = [p.arg for p in (*a.posonlyargs, *a.args)][1:]
    if a.vararg:
        args.append(f"*{a.vararg.arg}")
    args += [f"{p.arg}={p.arg}" for p in a.kwonlyargs]
    if a.kwarg:
        args.append(f"**{a.kwarg.arg}")
    return _spec(f"if not self._balance_enabled:\n    return super().{METHOD}({', '.join(args)})\n")


@dataclass
class _Located:
    block: list[ast.stmt]
    index: int

    @property
    def node(self) -> ast.stmt:
        return self.block[self.index]


def _exactly_once(func: ast.FunctionDef, spec: str, label: str) -> _Located:
    hits = _find(func, spec)
    if len(hits) != 1:
        raise VerificationFailed(f"{label} is present {len(hits)} times, expected exactly once: run `make regen`")
    return _Located(*hits[0])


def _span(node: ast.stmt) -> set[int]:
    return set(range(node.lineno, node.end_lineno + 1))  # type: ignore[operator]


def _text(source: str, func: ast.FunctionDef, *, drop: set[int], mask: set[int]) -> list[str]:
    """The function's lines without ``drop``; ``mask`` lines become one ``<delta 3>`` marker."""
    lines = source.splitlines()
    first = min([func.lineno, *(d.lineno for d in func.decorator_list)])
    out: list[str] = []
    for n in range(first, func.end_lineno + 1):  # type: ignore[operator]
        if n in drop:
            continue
        line = "<delta 3>" if n in mask else lines[n - 1]
        if not (line == "<delta 3>" and out and out[-1] == line):
            out.append(line)
    return out


def verify(generated: str, upstream: str) -> None:
    """Raise VerificationFailed with the first disagreement; return None when all checks pass."""
    try:
        gen_tree = ast.parse(generated)
    except SyntaxError as exc:
        raise VerificationFailed(f"generated file does not parse (line {exc.lineno}): run `make regen`") from None
    gen = _method(gen_tree, None)
    up = _method(ast.parse(upstream), UPSTREAM_CLASS)

    # Delta 1: first statement of the body, forwarding exactly upstream's parameters.
    d1 = _exactly_once(gen, _forwarding_spec(up), "delta 1 (disabled-path early return)")
    if d1.block is not gen.body or d1.index != 0:
        raise VerificationFailed("delta 1 is not the first statement of schedule(): run `make regen`")
    # Delta 2: immediately after upstream's running-cap break, inside a while loop.
    d2 = _exactly_once(gen, _spec(_GATE), "delta 2 (leader-at-cap gate)")
    before = d2.block[d2.index - 1] if d2.index > 0 else None
    if before is None or _dump(before) not in {_spec(c) for c in _CAP_BREAK}:
        raise VerificationFailed("delta 2 does not directly follow the running-cap break: run `make regen`")
    # Delta 3: where upstream has the assert.
    d3 = _exactly_once(gen, _spec(_QUEUE_BREAK), "delta 3 (request_queue None break)")
    up_asserts = _find(up, _spec(_QUEUE_ASSERT))
    if len(up_asserts) != 1:
        raise VerificationFailed("upstream schedule() does not have exactly one `assert request_queue is not None`")
    up_node = _Located(*up_asserts[0]).node

    # Text: drop delta 1/2 lines, mask delta 3 and upstream's assert, then compare line by line.
    gen_text = _text(generated, gen, drop=_span(d1.node) | _span(d2.node), mask=_span(d3.node))
    up_text = _text(upstream, up, drop=set(), mask=_span(up_node))
    if gen_text != up_text:
        for i, (g, u) in enumerate(zip(gen_text, up_text, strict=False)):
            if g != u:
                raise VerificationFailed(
                    f"schedule() text differs from upstream at its line {i + 1}: "
                    f"upstream {u.strip()!r}, generated {g.strip()!r}; run `make regen`"
                )
        raise VerificationFailed(
            f"schedule() has {len(gen_text)} lines without the deltas, upstream has {len(up_text)}: run `make regen`"
        )
    indent_gen = generated.splitlines()[d3.node.lineno - 1][: d3.node.col_offset]
    indent_up = upstream.splitlines()[up_node.lineno - 1][: up_node.col_offset]
    if indent_gen != indent_up:
        raise VerificationFailed("delta 3 is not indented like upstream's assert: run `make regen`")

    # AST: remove deltas 1 and 2, put the assert back for delta 3, compare the trees.
    # Later positions first, so the indices of the others stay valid (2 and 3 share a block).
    d3.block[d3.index] = ast.parse(_QUEUE_ASSERT).body[0]
    del d2.block[d2.index]
    del d1.block[d1.index]
    if _dump(gen) != _dump(up):
        raise VerificationFailed("schedule() minus the deltas is not upstream's AST: run `make regen`")

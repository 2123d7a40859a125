"""Independent inverse check: generated ``schedule()`` minus the deltas equals upstream's.

Written against the stdlib ``ast`` with its own textual spec of each delta, sharing no code with
the libcst transforms in ``deltas.py``: a bug in one is caught by the other. It does not keep a
list of upstream's cap-check shapes: it reads what the gate compares, finds upstream's check right
before it, and requires the same operator, the same cap, and a gathered count equal to upstream's.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from generator.errors import VerificationFailed

UPSTREAM_CLASS = "Scheduler"
METHOD = "schedule"
COUNT_METHOD = "balance_running_count"
LEADER = "self.balance_leader_running"

_QUEUE_BREAK = "if request_queue is None:\n    break\n"
_QUEUE_ASSERT = "assert request_queue is not None\n"
_EMPTY_QUEUE = "not request_queue"
# Before 0.18 there is no queue variable: the loop peeks the waiting queue it tests for emptiness.
_QUEUE_NAME = "request_queue"
_WAITING = "self.waiting"
_DIRECT_PEEK = "request = self.waiting.peek_request()\n"
_REGEN = "run `make regen`"
_TEACH = "generator/builder/deltas.py and generator/builder/verify.py"


def _dump(node: ast.AST) -> str:
    return ast.dump(node, include_attributes=False)


@dataclass
class _Located:
    owner: ast.AST
    block: list[ast.stmt]
    index: int

    @property
    def node(self) -> ast.stmt:
        return self.block[self.index]

    @property
    def in_loop(self) -> bool:
        return isinstance(self.owner, (ast.While, ast.For))


def _statements(func: ast.FunctionDef) -> Iterator[_Located]:
    for owner in ast.walk(func):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(owner, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                # A loop's `else` is not inside the loop: `break` there belongs to an outer one.
                inside = owner if name == "body" else func
                yield from (_Located(inside, block, i) for i in range(len(block)))


def _find(func: ast.FunctionDef, code: str) -> list[_Located]:
    """Statements equal to ``code`` as AST. Dumping is the cost, so only same-typed candidates are dumped."""
    spec = ast.parse(code).body[0]
    shape = _dump(spec)
    return [s for s in _statements(func) if _could_be(s.node, spec) and _dump(s.node) == shape]


def _could_be(node: ast.stmt, spec: ast.stmt) -> bool:
    if type(node) is not type(spec):
        return False
    if isinstance(spec, ast.If):
        assert isinstance(node, ast.If)
        return not node.orelse and [type(s) for s in node.body] == [type(s) for s in spec.body]
    return True


def is_break_if(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and not node.orelse and [type(s) for s in node.body] == [ast.Break]


def methods_named(tree: ast.Module, class_name: str | None, method: str) -> list[ast.FunctionDef]:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and (class_name is None or n.name == class_name)]
    return [n for c in classes for n in c.body if isinstance(n, ast.FunctionDef) and n.name == method]


def _method(tree: ast.Module, class_name: str | None) -> ast.FunctionDef:
    methods = methods_named(tree, class_name, METHOD)
    if len(methods) != 1:
        where = f"class {class_name}" if class_name else "the generated classes"
        raise VerificationFailed(f"expected one {METHOD}() in {where}, found {len(methods)}: {_REGEN}")
    return methods[0]


def _forwarding(up: ast.FunctionDef) -> str:
    a = up.args
    args = [p.arg for p in (*a.posonlyargs, *a.args)][1:]
    if a.vararg:
        args.append(f"*{a.vararg.arg}")
    args += [f"{p.arg}={p.arg}" for p in a.kwonlyargs]
    if a.kwarg:
        args.append(f"**{a.kwarg.arg}")
    return f"if not self._balance_enabled:\n    return super().{METHOD}({', '.join(args)})\n"


def _exactly_once(found: list[_Located], label: str) -> _Located:
    if len(found) != 1:
        raise VerificationFailed(f"{label} is present {len(found)} times, expected exactly once: {_REGEN}")
    return found[0]


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


@dataclass(frozen=True)
class Verified:
    """What verify found, in words the CLI prints."""

    count: str  # upstream's cap-check count, which the runtime gathers
    check: str  # upstream's cap check, as the leader is asked it
    queue_note: str  # delta 3: where it applies, or why it is not needed
    flag: str | None = None  # the flag upstream's check and the gate set (0.34+: ``loads_only``); None: they break

    @property
    def question(self) -> str:
        """What the leader is asked, and what its answer does where it does not break."""
        return f"`{self.check}`" + (f" (the answer sets `{self.flag}`)" if self.flag else "")

    @property
    def summary(self) -> str:
        return f"balance deltas 1, 2{self.queue_note}"


def _sets_flag(node: ast.stmt) -> str | None:
    """``if <test>: <name> = True`` and nothing else: the name, else None."""
    if not (isinstance(node, ast.If) and not node.orelse and len(node.body) == 1):
        return None
    (inner,) = node.body
    ok = (
        isinstance(inner, ast.Assign)
        and len(inner.targets) == 1
        and isinstance(inner.targets[0], ast.Name)
        and isinstance(inner.value, ast.Constant)
        and inner.value.value is True
    )
    return inner.targets[0].id if ok else None  # type: ignore[attr-defined]


def _leader_gate(gen: ast.FunctionDef, leaders: tuple[str, ...] = (LEADER,)) -> _Located:
    """``if <leader> <op> <cap>:`` that breaks, or sets a flag (where upstream's check sets one)."""
    wanted = {_dump(ast.parse(code, mode="eval").body) for code in leaders}
    gates = [
        s
        for s in _statements(gen)
        if (is_break_if(s.node) or _sets_flag(s.node) is not None)
        and isinstance(test := s.node.test, ast.Compare)  # type: ignore[attr-defined]
        and len(test.ops) == 1
        and _dump(test.left) in wanted
    ]
    return _exactly_once(gates, "delta 2 (leader-at-cap gate)")


def _same_question(check: ast.expr, gate: ast.Compare) -> bool:
    return (
        isinstance(check, ast.Compare)
        and [type(o) for o in check.ops] == [type(o) for o in gate.ops]
        and [_dump(c) for c in check.comparators] == [_dump(c) for c in gate.comparators]
    )


def _upstream_check(before: ast.stmt | None, gate: ast.If) -> ast.Compare | None:
    """Upstream's comparison in the statement before the gate, when the gate asks it and stops as it does.

    A gate that breaks follows ``if <check>: break``; a gate that sets ``<flag> = True`` follows
    ``<flag> = <check>`` or ``<flag> = ... or <check> or ...``, the one disjunct asking the gate's question.
    """
    assert isinstance(gate.test, ast.Compare)
    if before is None:
        return None
    flag = _sets_flag(gate)
    if flag is None:
        if not (isinstance(before, ast.If) and is_break_if(before) and isinstance(before.test, ast.Compare)):
            return None
        return before.test if _same_question(before.test, gate.test) else None
    if not (
        isinstance(before, ast.Assign) and [_dump(t) for t in before.targets] == [_dump(ast.Name(flag, ast.Store()))]
    ):
        return None
    value = before.value
    parts = value.values if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or) else [value]
    asked = [p for p in parts if _same_question(p, gate.test)]
    return asked[0] if len(asked) == 1 else None  # type: ignore[return-value]


def _upstream_count(gate: _Located) -> tuple[ast.expr, str]:
    """Upstream's cap check sits right before the gate; return its count (through ``x = ...``) and test."""
    node = gate.node
    assert isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
    if not gate.in_loop:
        raise VerificationFailed(f"delta 2 is not directly inside the WAITING loop: {_REGEN}")
    check = _upstream_check(gate.block[gate.index - 1] if gate.index > 0 else None, node)
    if check is None:
        stop = "break" if _sets_flag(node) is None else f"`{_sets_flag(node)}` setting"
        raise VerificationFailed(
            f"delta 2 does not directly follow upstream's running-cap {stop} with the same operator and cap: {_REGEN}"
        )
    count = check.left
    if isinstance(count, ast.Name):
        assign = gate.block[gate.index - 2] if gate.index > 1 else None
        if not (
            isinstance(assign, ast.Assign)
            and [_dump(t) for t in assign.targets] == [_dump(ast.Name(count.id, ast.Store()))]
        ):
            raise VerificationFailed(
                f"upstream's cap check compares `{count.id}`, which is not assigned right before it: "
                f"teach {_TEACH} this shape"
            )
        count = assign.value
    return count, ast.unparse(check)


def _check_count_method(tree: ast.Module, count: ast.expr) -> None:
    methods = methods_named(tree, None, COUNT_METHOD)
    if len(methods) != 1:
        raise VerificationFailed(f"expected one {COUNT_METHOD}() in the generated classes, found {len(methods)}")
    body = [s for s in methods[0].body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if not (len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None):
        raise VerificationFailed(f"{COUNT_METHOD}() must be one `return <upstream's count>`: {_REGEN}")
    if _dump(body[0].value) != _dump(count):
        raise VerificationFailed(
            f"{COUNT_METHOD}() returns `{ast.unparse(body[0].value)}` but upstream's cap check counts "
            f"`{ast.unparse(count)}`: {_REGEN}"
        )


def _upstream_empty_queue_break(up: ast.FunctionDef) -> _Located | None:
    wanted = _dump(ast.parse(_EMPTY_QUEUE, mode="eval").body)
    stops = []
    for s in _statements(up):
        if not (s.in_loop and is_break_if(s.node)):
            continue
        test = s.node.test  # type: ignore[attr-defined]
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
        if any(_dump(p) == wanted for p in parts):
            stops.append(s)
    return stops[0] if len(stops) == 1 else None


def _direct_peek(up: ast.FunctionDef) -> _Located | None:
    """Before 0.18: no ``request_queue`` at all; ``self.waiting`` peeked by a loop that needs it non-empty."""
    if any(isinstance(n, ast.Name) and n.id == _QUEUE_NAME for n in ast.walk(up)):
        return None
    waiting = _dump(ast.parse(_WAITING, mode="eval").body)
    peeks = []
    for s in _find(up, _DIRECT_PEEK):
        loop = s.owner
        if not isinstance(loop, ast.While):
            continue
        test = loop.test
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        if any(_dump(p) == waiting for p in parts):
            peeks.append(s)
    return peeks[0] if len(peeks) == 1 else None


def _delta3_not_needed(up: ast.FunctionDef) -> str:
    """Why upstream needs no delta 3, in words; VerificationFailed when neither known reason holds."""
    stop = _upstream_empty_queue_break(up)
    if stop is not None:
        return (
            "; delta 3 not needed: upstream breaks on an empty queue itself "
            f"(line {stop.node.lineno}: `if {ast.unparse(stop.node.test)}: break`)"  # type: ignore[attr-defined]
        )
    peek = _direct_peek(up)
    if peek is not None:
        return (
            "; delta 3 not needed: the WAITING loop has no request_queue "
            f"(line {peek.node.lineno}: `{ast.unparse(peek.node)}` "
            f"under `while {ast.unparse(peek.owner.test)}`)"  # type: ignore[attr-defined]
        )
    raise VerificationFailed(
        "upstream schedule() has neither `assert request_queue is not None`, nor exactly one "
        "`if not request_queue ...: break` in a loop, nor (without any request_queue) one "
        "`request = self.waiting.peek_request()` in a `while self.waiting ...` loop: "
        f"teach {_TEACH} this shape"
    )


# A consumer's tree gathers into its own state (vllm-ascend: a list of per-rank tensors) and says what
# each rank sends in its own gather method: the leader as its gate reads it, and where the count is.
TREE_LEADERS = (LEADER, "max(t.item() for t in self.balance_queue)")
_TREE_GATHER = "balance_gather"


def verify_copy(text: str, upstream: str, *, class_name: str) -> Verified:
    """``verify`` for a copy kept in a consumer's file: its class's ``schedule()``, its own gather's count."""
    return verify(text, upstream, class_name=class_name, leaders=TREE_LEADERS, count_check=_check_tree_payload)


def _check_tree_payload(tree: ast.Module, count: ast.expr, class_name: str | None) -> None:
    """The tree's gather sends upstream's count: ``torch.tensor([<count>], ...)`` in its gather method."""
    sent = [
        node.args[0].elts[0]
        for cls in tree.body
        if isinstance(cls, ast.ClassDef) and cls.name == class_name
        for method in cls.body
        if isinstance(method, ast.FunctionDef) and method.name in (_TREE_GATHER, COUNT_METHOD)
        for node in ast.walk(method)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func) == "torch.tensor"
        and node.args
        and isinstance(node.args[0], ast.List)
        and len(node.args[0].elts) == 1
    ]
    if not sent:
        _check_count_method(tree, count)  # the generated module's form: balance_running_count()
        return
    if len(sent) != 1 or _dump(sent[0]) != _dump(count):
        shown = ", ".join(f"`{ast.unparse(n)}`" for n in sent)
        raise VerificationFailed(
            f"{class_name}.{_TREE_GATHER}() sends {shown} but upstream's cap check counts `{ast.unparse(count)}`: "
            "run `balance-patchgen --root . regen`"
        )


def verify(
    generated: str,
    upstream: str,
    *,
    class_name: str | None = None,
    leaders: tuple[str, ...] = (LEADER,),
    count_check: Callable[[ast.Module, ast.expr, str | None], None] | None = None,
) -> Verified:
    """Raise VerificationFailed with the first disagreement; say what was verified otherwise."""
    try:
        gen_tree = ast.parse(generated)
    except SyntaxError as exc:
        raise VerificationFailed(f"generated file does not parse (line {exc.lineno}): {_REGEN}") from None
    gen = _method(gen_tree, class_name)
    up = _method(ast.parse(upstream), UPSTREAM_CLASS)

    # Delta 1: first statement of the body, forwarding exactly upstream's parameters.
    d1 = _exactly_once(_find(gen, _forwarding(up)), "delta 1 (disabled-path early return)")
    if d1.block is not gen.body or d1.index != 0:
        raise VerificationFailed(f"delta 1 is not the first statement of schedule(): {_REGEN}")
    # Delta 2: right after upstream's own cap check, same operator and cap, upstream's count gathered.
    d2 = _leader_gate(gen, leaders)
    count, check = _upstream_count(d2)
    flag = _sets_flag(d2.node)
    if count_check is None:
        _check_count_method(gen_tree, count)
    else:
        count_check(gen_tree, count, class_name)
    # Delta 3: where upstream asserts; not needed where upstream breaks on an empty queue itself.
    gen_breaks = _find(gen, _QUEUE_BREAK)
    up_asserts = _find(up, _QUEUE_ASSERT)
    d3: _Located | None = None
    up_assert: _Located | None = None
    if up_asserts:
        up_assert = _exactly_once(up_asserts, "upstream's `assert request_queue is not None`")
        d3 = _exactly_once(gen_breaks, "delta 3 (request_queue None break)")
        queue_note = " and 3"
    else:
        if gen_breaks:
            raise VerificationFailed(f"delta 3 is present but upstream has no assert for it to replace: {_REGEN}")
        queue_note = _delta3_not_needed(up)
        if class_name is None:  # the generated module's header; a tree's marker says it on its edits line
            _check_header_says_not_needed(generated)

    # Text: drop delta 1/2 lines, mask delta 3 and upstream's assert, then compare line by line.
    gen_text = _text(generated, gen, drop=_span(d1.node) | _span(d2.node), mask=_span(d3.node) if d3 else set())
    up_text = _text(upstream, up, drop=set(), mask=_span(up_assert.node) if up_assert else set())
    if gen_text != up_text:
        for i, (g, u) in enumerate(zip(gen_text, up_text, strict=False)):
            if g != u:
                raise VerificationFailed(
                    f"schedule() text differs from upstream at its line {i + 1}: "
                    f"upstream {u.strip()!r}, generated {g.strip()!r}; {_REGEN}"
                )
        raise VerificationFailed(
            f"schedule() has {len(gen_text)} lines without the deltas, upstream has {len(up_text)}: {_REGEN}"
        )
    if d3 is not None and up_assert is not None:
        indent_gen = generated.splitlines()[d3.node.lineno - 1][: d3.node.col_offset]
        indent_up = upstream.splitlines()[up_assert.node.lineno - 1][: up_assert.node.col_offset]
        if indent_gen != indent_up:
            raise VerificationFailed(f"delta 3 is not indented like upstream's assert: {_REGEN}")

    # AST: remove deltas 1 and 2, put the assert back for delta 3, compare the trees.
    # Later positions first, so the indices of the others stay valid (2 and 3 share a block).
    if d3 is not None:
        d3.block[d3.index] = ast.parse(_QUEUE_ASSERT).body[0]
    del d2.block[d2.index]
    del d1.block[d1.index]
    if _dump(gen) != _dump(up):
        raise VerificationFailed(f"schedule() minus the deltas is not upstream's AST: {_REGEN}")
    return Verified(count=ast.unparse(count), check=check, queue_note=queue_note, flag=flag)


def _check_header_says_not_needed(generated: str) -> None:
    lines = [line for line in generated.splitlines() if line.startswith("#   delta 3:")]
    if len(lines) != 1 or "NOT NEEDED" not in lines[0]:
        raise VerificationFailed(f"the header does not record that delta 3 is not needed at this tag: {_REGEN}")

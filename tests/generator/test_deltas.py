"""Each delta on small hand-written sources: applies once, refuses 0 or 2+ anchors, keeps text."""

from __future__ import annotations

import textwrap

import pytest

from generator.builder import deltas, extract
from generator.errors import DeltaDoesNotApply

TAG = "v9.9.9"

UPSTREAM = textwrap.dedent(
    """\
    class Scheduler:
        def schedule(self, throttle_prefills: bool = False) -> "Out":
            # leading comment, kept
            self.current_step += 1

            while (self.waiting or self.skipped_waiting) and token_budget > 0:
                if len(self.running) == self.max_num_running_reqs:
                    break

                request_queue = self._select_waiting_queue_for_scheduling()
                assert request_queue is not None   # odd   spacing kept? no: replaced

                request = request_queue.peek_request()   # spacing  kept
            return  out
    """
)


def _apply(source: str, delta: deltas.Delta) -> str:
    module = extract.parse(source, TAG)
    found = extract.extract(module, TAG)
    patched, _ = delta.apply(found.method, deltas.DeltaContext(TAG, module, method=found.method))
    return module.code_for_node(patched)


def _method_text(source: str) -> str:
    module = extract.parse(source, TAG)
    return module.code_for_node(extract.extract(module, TAG).method)


def test_delta1_inserts_early_return_first_and_keeps_the_rest() -> None:
    out = _apply(UPSTREAM, deltas.DisabledPathDelegates())
    original = _method_text(UPSTREAM)
    lines = out.splitlines()
    assert lines[1].strip().startswith("if not self._balance_enabled:  # balance delta 1")
    assert lines[2].strip() == "return super().schedule(throttle_prefills)  # balance delta 1"
    # Removing the two inserted lines gives back upstream's text byte for byte.
    assert "\n".join(lines[:1] + lines[3:]) + "\n" == original


@pytest.mark.parametrize(
    ("signature", "call"),
    [
        ("self", "super().schedule()"),
        ("self, throttle_prefills: bool = False", "super().schedule(throttle_prefills)"),
        ("self, a, /, b, *args, c, d=1, **kw", "super().schedule(a, b, *args, c=c, d=d, **kw)"),
        ("self, a, *, k", "super().schedule(a, k=k)"),
    ],
)
def test_delta1_forwards_exactly_the_upstream_parameters(signature: str, call: str) -> None:
    source = f"class Scheduler:\n    def schedule({signature}):\n        return 1\n"
    assert f"return {call}  # balance delta 1" in _apply(source, deltas.DisabledPathDelegates())


def test_delta1_keeps_a_docstring_first() -> None:
    source = 'class Scheduler:\n    def schedule(self):\n        """Doc."""\n        return 1\n'
    lines = _apply(source, deltas.DisabledPathDelegates()).splitlines()
    assert lines[1].strip() == '"""Doc."""'
    assert "balance delta 1" in lines[2]


def test_delta2_goes_right_after_the_running_cap_break() -> None:
    lines = _apply(UPSTREAM, deltas.LeaderAtCapFreezes()).splitlines()
    cap = next(i for i, line in enumerate(lines) if "len(self.running) ==" in line)
    assert lines[cap + 1].strip() == "break"
    assert lines[cap + 2].strip() == (
        "if self.balance_leader_running == self.max_num_running_reqs:"
        "  # balance delta 2: leader at cap => global freeze"
    )
    assert lines[cap + 3].strip() == "break  # balance delta 2"
    # Indented like the cap check it follows.
    assert lines[cap + 2][: len(lines[cap]) - len(lines[cap].lstrip())] == lines[cap][: lines[cap].index("if")]


def test_delta3_replaces_the_assert_and_keeps_neighbours_verbatim() -> None:
    out = _apply(UPSTREAM, deltas.QueueNoneBreaks())
    assert "assert request_queue is not None" not in out
    # At the assert's own indentation (the method text is dedented by one level here).
    assert "\n        if request_queue is None:  # balance delta 3" in out
    assert "\n            break  # balance delta 3" in out
    # Comments and odd formatting of upstream lines around it survive untouched.
    assert "request = request_queue.peek_request()   # spacing  kept" in out
    assert "return  out" in out
    assert "# leading comment, kept" in out


@pytest.mark.parametrize(
    ("delta", "mutate"),
    [
        (deltas.LeaderAtCapFreezes(), lambda s: s.replace("if len(self.running) ==", "if len(self.running) <")),
        # neither the assert nor upstream's own empty-queue break: a shape delta 3 does not know
        (deltas.QueueNoneBreaks(), lambda s: s.replace("assert request_queue is not None", "pass")),
    ],
)
def test_missing_anchor_is_a_typed_error_with_upstream_context(delta: deltas.Delta, mutate) -> None:  # type: ignore[no-untyped-def]
    source = mutate(UPSTREAM)
    assert source != UPSTREAM
    with pytest.raises(DeltaDoesNotApply) as info:
        _apply(source, delta)
    message = str(info.value)
    assert f"delta {delta.number}" in message and TAG in message and "not found" in message
    # The detail shows numbered upstream lines around the WAITING loop.
    assert "while (self.waiting or self.skipped_waiting)" in info.value.detail
    assert "|" in info.value.detail.splitlines()[0]


@pytest.mark.parametrize(
    ("delta", "line"),
    [
        (
            deltas.LeaderAtCapFreezes(),
            "            if len(self.running) == self.max_num_running_reqs:\n                break\n",
        ),
        (
            deltas.QueueNoneBreaks(),
            "            assert request_queue is not None   # odd   spacing kept? no: replaced\n",
        ),
    ],
)
def test_anchor_twice_is_ambiguous(delta: deltas.Delta, line: str) -> None:
    assert line in UPSTREAM
    with pytest.raises(DeltaDoesNotApply, match=rf"delta {delta.number} .* found 2 times \(ambiguous\)"):
        _apply(UPSTREAM.replace(line, line + line), delta)


def test_assert_outside_a_loop_is_refused() -> None:
    # `break` outside a loop would not compile: the delta must not apply there.
    source = "class Scheduler:\n    def schedule(self):\n        assert request_queue is not None\n"
    with pytest.raises(DeltaDoesNotApply, match="delta 3"):
        _apply(source, deltas.QueueNoneBreaks())


def test_all_deltas_on_the_real_pinned_upstream(upstream_pinned) -> None:  # type: ignore[no-untyped-def]
    module = extract.parse(upstream_pinned.text, upstream_pinned.tag)
    found = extract.extract(module, upstream_pinned.tag)
    patched = deltas.apply_all(found.method, deltas.DeltaContext(upstream_pinned.tag, module))
    out = module.code_for_node(patched.method)
    assert [o.number for o in patched.outcomes] == [1, 2, 3]
    for outcome in patched.outcomes:  # two lines for each applied delta, none for one not needed
        assert out.count(f"# balance delta {outcome.number}") == (2 if outcome.applied else 0)
    assert patched.outcomes[0].applied and patched.outcomes[1].applied
    compile(out, "<patched>", "exec")

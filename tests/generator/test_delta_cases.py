"""One data case per family of upstream shapes: a small upstream-like input and the exact module.

Like LibCST's ``assertCodemod`` and black's data cases: ``data/deltas/<family>.in.py`` is upstream,
``<family>.out.py`` the whole expected module, compared byte for byte. The expected files were
read line by line against the family's real release, and each must also pass ``verify`` (the
independent twin) against its input.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from generator.builder import pipeline, verify
from generator.errors import DeltaDoesNotApply, VerificationFailed
from generator.sources.base import UpstreamFile

DATA = Path(__file__).parent / "data" / "deltas"
CASES = sorted(p.name.removesuffix(".in.py") for p in DATA.glob("*.in.py"))
TAG = "v9.9.9"


def _generate(source: bytes) -> str:
    return pipeline.generate(UpstreamFile(tag=TAG, data=source, origin="test"))


def test_every_family_has_a_case() -> None:
    assert CASES == ["v0_13_family", "v0_24_family", "v0_25_family", "v0_31_family", "v0_34_family"]


@pytest.mark.parametrize("case", CASES)
def test_case_generates_exactly_the_expected_module(case: str) -> None:
    source = (DATA / f"{case}.in.py").read_bytes()
    expected = (DATA / f"{case}.out.py").read_text(encoding="utf-8")
    assert _generate(source) == expected
    assert f"# upstream sha256: {hashlib.sha256(source).hexdigest()}\n" in expected
    verify.verify(expected, source.decode())


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("v0_31_family", "delta 3 not needed: upstream breaks on an empty queue itself (line 15:"),
        ("v0_34_family", "delta 3 not needed: upstream breaks on an empty queue itself (line 24:"),
        (
            "v0_13_family",
            "delta 3 not needed: the WAITING loop has no request_queue (line 19: "
            "`request = self.waiting.peek_request()` under `while self.waiting and token_budget > 0`)",
        ),
    ],
)
def test_not_needed_delta3_is_said_in_the_header_and_by_verify(case: str, why: str) -> None:
    source = (DATA / f"{case}.in.py").read_text(encoding="utf-8")
    expected = (DATA / f"{case}.out.py").read_text(encoding="utf-8")
    assert "#   delta 3: no waiting queue breaks instead of asserting -- NOT NEEDED at v9.9.9\n" in expected
    assert "balance delta 3" not in expected.split("class BalanceScheduler")[1]
    assert why in verify.verify(expected, source).summary
    # A header that does not say so is refused by verify, whichever the reason.
    lying = expected.replace(" -- NOT NEEDED at v9.9.9", "", 1)
    with pytest.raises(VerificationFailed, match="header does not record"):
        verify.verify(lying, source)


PEEK = "                request = self.waiting.peek_request()\n"


@pytest.mark.parametrize(
    ("old", "new", "found"),
    [
        # a queue variable appears, but neither the assert nor an empty-queue break guards it
        (PEEK, f"{16 * ' '}request_queue = self.waiting\n{PEEK.replace('self.waiting', 'request_queue')}", 0),
        # the loop's test no longer stops on an empty waiting queue
        ("while self.waiting and token_budget > 0:", "while token_budget > 0:", 0),
        # the peek is not the WAITING loop's own (two of them: ambiguous)
        (PEEK, PEEK + PEEK, 2),
    ],
    ids=["queue-name-unguarded", "loop-test-without-waiting", "two-peeks"],
)
def test_a_pre_018_loop_in_another_shape_fails_delta3_and_verify(old: str, new: str, found: int) -> None:
    source = (DATA / "v0_13_family.in.py").read_text(encoding="utf-8")
    assert old in source
    changed = source.replace(old, new, 1)
    what = "not found" if found == 0 else f"found {found} times"
    with pytest.raises(DeltaDoesNotApply, match=rf"delta 3 .* {what}") as info:
        _generate(changed.encode())
    assert "|" in info.value.detail.splitlines()[0]
    # The independent twin refuses the same upstream: the known-good module is not "verified" against it.
    expected = (DATA / "v0_13_family.out.py").read_text(encoding="utf-8")
    with pytest.raises(
        VerificationFailed, match=r"request = self\.waiting\.peek_request.*teach generator/builder/deltas\.py"
    ):
        verify.verify(expected, changed)


@pytest.mark.parametrize(
    ("case", "old", "new"),
    [
        # a comparison no release has used
        ("v0_31_family", "if num_running >= self.max_num_active_reqs:", "if num_running > self.max_num_active_reqs:"),
        # a count no release has used
        ("v0_25_family", "+ self.num_waiting_for_streaming_input", "+ self.num_paused"),
        # a cap attribute no release has used
        ("v0_24_family", "self.max_num_running_reqs:", "self.max_num_seqs:"),
        # the name compared is not the one assigned right before
        ("v0_31_family", "            if num_running >= self", "            if num_runnin >= self"),
        # a flag no release has stopped admission with: whether it stops admission is a maintainer's call
        ("v0_34_family", "loads_only = (", "prefetch_only = ("),
        # the cap check joined by `and`: the flag no longer holds whenever the cap is reached
        ("v0_34_family", "self.max_num_active_reqs or token_budget", "self.max_num_active_reqs and token_budget"),
    ],
    ids=["operator", "count", "cap", "unresolved-name", "unknown-flag", "flag-and"],
)
def test_a_new_cap_check_shape_fails_loudly_with_upstream_context(case: str, old: str, new: str) -> None:
    source = (DATA / f"{case}.in.py").read_text(encoding="utf-8")
    assert old in source
    with pytest.raises(DeltaDoesNotApply) as info:
        _generate(source.replace(old, new).encode())
    assert "delta 2" in str(info.value) and "not found" in str(info.value)
    detail = info.value.detail.splitlines()
    assert detail and all("|" in line or line.strip() == "..." for line in detail)
    assert any("while" in line for line in detail)  # the WAITING loop is shown, numbered


def test_neither_the_assert_nor_an_empty_queue_break_fails_delta3_with_context() -> None:
    source = (DATA / "v0_31_family.in.py").read_text(encoding="utf-8")
    changed = source.replace("if not request_queue or input_budget <= draft_slots:", "if input_budget <= draft_slots:")
    assert changed != source
    with pytest.raises(DeltaDoesNotApply, match=r"delta 3 .* not found") as info:
        _generate(changed.encode())
    assert "while token_budget > 0:" in info.value.detail


def test_two_empty_queue_breaks_are_ambiguous() -> None:
    source = (DATA / "v0_31_family.in.py").read_text(encoding="utf-8")
    line = "            if not request_queue or input_budget <= draft_slots:\n                break\n"
    with pytest.raises(DeltaDoesNotApply, match=r"delta 3 .* found 2 times"):
        _generate(source.replace(line, line + line).encode())


V034_GATE = (
    "            if self.balance_leader_running >= self.max_num_active_reqs:  # balance delta 2: leader at cap => "
    "global freeze\n"
    "                loads_only = True  # balance delta 2\n"
)


def test_at_a_stop_flag_the_gate_sets_upstreams_flag_right_after_upstreams_check() -> None:
    """0.34's `loads_only`: every rank enters the mode the leader's own check would put it in (read by hand)."""
    expected = (DATA / "v0_34_family.out.py").read_text(encoding="utf-8")
    check = (
        "            loads_only = (\n"
        "                num_running >= self.max_num_active_reqs or token_budget <= 0\n"
        "            )\n"
    )
    assert check + V034_GATE + "            if not loads_only:\n" in expected
    assert "break  # balance delta 2" not in expected


@pytest.mark.parametrize(
    ("gate", "why"),
    [
        # a gate that breaks where upstream only sets its flag would also stop the loads the leader starts
        (V034_GATE.replace("loads_only = True  #", "break  #"), "running-cap break with the same operator"),
        # a gate that sets another name than upstream's flag changes nothing upstream reads
        (V034_GATE.replace("loads_only = True", "load_only = True"), "running-cap `load_only` setting"),
        # the leader asked another cap than upstream's check
        (V034_GATE.replace(">= self.max_num_active_reqs:", ">= self.max_num_running_reqs:"), "same operator and cap"),
    ],
    ids=["break-instead-of-flag", "other-flag", "other-cap"],
)
def test_verify_refuses_a_flag_gate_that_is_not_upstreams_question(gate: str, why: str) -> None:
    source = (DATA / "v0_34_family.in.py").read_text(encoding="utf-8")
    expected = (DATA / "v0_34_family.out.py").read_text(encoding="utf-8")
    assert V034_GATE in expected
    with pytest.raises(VerificationFailed, match=why):
        verify.verify(expected.replace(V034_GATE, gate), source)


def test_verify_says_what_the_leaders_answer_sets() -> None:
    source = (DATA / "v0_34_family.in.py").read_text(encoding="utf-8")
    verified = verify.verify((DATA / "v0_34_family.out.py").read_text(encoding="utf-8"), source)
    assert verified.question == "`num_running >= self.max_num_active_reqs` (the answer sets `loads_only`)"
    assert verified.count == "len(self.running) + self.num_waiting_for_streaming_input"

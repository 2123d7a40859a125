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
    assert CASES == ["v0_13_family", "v0_24_family", "v0_25_family", "v0_31_family"]


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
    with pytest.raises(VerificationFailed, match=r"request = self\.waiting\.peek_request.*teach generator/deltas\.py"):
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
    ],
    ids=["operator", "count", "cap", "unresolved-name"],
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

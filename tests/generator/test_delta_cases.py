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

from generator import pipeline, verify
from generator.errors import DeltaDoesNotApply
from generator.sources.base import UpstreamFile

DATA = Path(__file__).parent / "data" / "deltas"
CASES = sorted(p.name.removesuffix(".in.py") for p in DATA.glob("*.in.py"))
TAG = "v9.9.9"


def _generate(source: bytes) -> str:
    return pipeline.generate(UpstreamFile(tag=TAG, data=source, origin="test"))


def test_every_family_has_a_case() -> None:
    assert CASES == ["v0_24_family", "v0_25_family", "v0_31_family"]


@pytest.mark.parametrize("case", CASES)
def test_case_generates_exactly_the_expected_module(case: str) -> None:
    source = (DATA / f"{case}.in.py").read_bytes()
    expected = (DATA / f"{case}.out.py").read_text(encoding="utf-8")
    assert _generate(source) == expected
    assert f"# upstream sha256: {hashlib.sha256(source).hexdigest()}\n" in expected
    verify.verify(expected, source.decode())


def test_not_needed_delta3_is_said_in_the_header_and_by_verify() -> None:
    source = (DATA / "v0_31_family.in.py").read_text(encoding="utf-8")
    expected = (DATA / "v0_31_family.out.py").read_text(encoding="utf-8")
    assert "#   delta 3: no waiting queue breaks instead of asserting -- NOT NEEDED at v9.9.9\n" in expected
    assert "balance delta 3" not in expected.split("class BalanceScheduler")[1]
    summary = verify.verify(expected, source).summary
    assert "delta 3 not needed: upstream breaks on an empty queue itself (line 15:" in summary


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

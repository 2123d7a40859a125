"""The independent inverse check catches every way a generated file can stray from upstream."""

from __future__ import annotations

import re

import pytest

from generator.builder import pipeline
from generator.builder.verify import verify
from generator.errors import VerificationFailed
from generator.sources import release
from generator.sources.base import UpstreamFile

GATE = (
    "                if self.balance_leader_running == self.max_num_running_reqs:"
    "  # balance delta 2: leader at cap => global freeze\n"
    "                    break  # balance delta 2\n"
)


@pytest.fixture(scope="module")
def generated(upstream_v024: UpstreamFile) -> str:
    text = pipeline.generate(upstream_v024)
    assert GATE in text
    return text


def test_generated_output_verifies_for_both_signatures(
    upstream_pinned: UpstreamFile, upstream_older: UpstreamFile
) -> None:
    verify(pipeline.generate(upstream_pinned), upstream_pinned.text)
    older = pipeline.generate(upstream_older)
    assert "            return super().schedule()  # balance delta 1" in older
    verify(older, upstream_older.text)
    with pytest.raises(VerificationFailed):  # and one tag's output is not the other's
        verify(older, upstream_pinned.text)


def test_delta2_moved_away_from_the_cap_break_fails(generated: str, upstream_v024: UpstreamFile) -> None:
    moved = generated.replace(GATE, "", 1)
    anchor = "                request_queue = self._select_waiting_queue_for_scheduling()\n"
    moved = moved.replace(anchor, anchor + GATE, 1)
    with pytest.raises(VerificationFailed, match="does not directly follow upstream's running-cap break"):
        verify(moved, upstream_v024.text)


def test_delta2_twice_fails(generated: str, upstream_v024: UpstreamFile) -> None:
    with pytest.raises(VerificationFailed, match="present 2 times"):
        verify(generated.replace(GATE, GATE + GATE, 1), upstream_v024.text)


def test_delta1_forwarding_the_wrong_arguments_fails(generated: str, upstream_v024: UpstreamFile) -> None:
    wrong = generated.replace("return super().schedule(throttle_prefills)", "return super().schedule()", 1)
    with pytest.raises(VerificationFailed, match="delta 1"):
        verify(wrong, upstream_v024.text)


def test_a_comment_only_change_in_the_body_fails_the_text_check(generated: str, upstream_v024: UpstreamFile) -> None:
    # The AST would not see it; the byte-for-byte text comparison must.
    edited = generated.replace("# NOTE(woosuk) on the scheduling algorithm:", "# NOTE on the algorithm:", 1)
    with pytest.raises(VerificationFailed, match="text differs from upstream"):
        verify(edited, upstream_v024.text)


def test_not_python_fails_cleanly(upstream_v024: UpstreamFile) -> None:
    with pytest.raises(VerificationFailed, match="does not parse"):
        verify("def (:\n", upstream_v024.text)


def test_gate_with_another_operator_than_upstream_fails(generated: str, upstream_v024: UpstreamFile) -> None:
    wrong = generated.replace("self.balance_leader_running == ", "self.balance_leader_running >= ", 1)
    with pytest.raises(VerificationFailed, match="same operator and cap"):
        verify(wrong, upstream_v024.text)


def test_gate_with_another_cap_than_upstream_fails(generated: str, upstream_v024: UpstreamFile) -> None:
    wrong = generated.replace(
        "self.balance_leader_running == self.max_num_running_reqs", "self.balance_leader_running == self.max_num_seqs"
    )
    with pytest.raises(VerificationFailed, match="same operator and cap"):
        verify(wrong, upstream_v024.text)


def test_gathered_count_other_than_upstreams_fails(generated: str, upstream_v024: UpstreamFile) -> None:
    wrong = generated.replace("        return len(self.running)\n", "        return len(self.waiting)\n", 1)
    assert wrong != generated
    with pytest.raises(VerificationFailed, match=r"balance_running_count\(\) returns `len\(self.waiting\)`"):
        verify(wrong, upstream_v024.text)


def test_delta3_where_upstream_has_no_assert_fails(generated: str, upstream_v024: UpstreamFile) -> None:
    upstream = upstream_v024.text.replace("assert request_queue is not None", "pass", 1)
    with pytest.raises(VerificationFailed, match="no assert for it to replace"):
        verify(generated, upstream)


@pytest.mark.network
@pytest.mark.parametrize("tag", ["v0.27.1", "v0.32.0", "v0.33.0", "v0.34.0"])
def test_real_release_of_each_later_family_generates_and_verifies(tag: str) -> None:

    upstream, _ = release.fetch(tag)
    text = pipeline.generate(upstream)
    compile(text, "<generated>", "exec")
    verified = verify(text, upstream.text)
    assert verified.count == "len(self.running) + self.num_waiting_for_streaming_input"
    not_needed = tag >= "v0.31.0"
    assert ("delta 3 not needed" in verified.summary) is not_needed
    assert ("if request_queue is None:  # balance delta 3" in text) is not not_needed
    cap = "max_num_active_reqs" if not_needed else "max_num_running_reqs"
    assert f"if self.balance_leader_running >= self.{cap}:  # balance delta 2" in text
    # From 0.34 upstream's check sets `loads_only` instead of breaking, and so does the leader's gate.
    flag = tag >= "v0.34.0"
    assert ("loads_only = True  # balance delta 2" in text) is flag
    assert ("break  # balance delta 2" in text) is not flag
    assert (verified.flag == "loads_only") is flag
    # Not needed at a tag whose header still claims the delta is an error, too.
    if not_needed:
        lying = text.replace(" -- NOT NEEDED at " + tag, "", 1)
        with pytest.raises(VerificationFailed, match="header does not record"):
            verify(lying, upstream.text)


@pytest.mark.network
@pytest.mark.parametrize("tag", ["v0.13.0", "v0.17.1"])
def test_real_release_before_018_generates_and_verifies_with_delta3_not_needed(tag: str) -> None:
    upstream, _ = release.fetch(tag)
    method = upstream.text.split("    def schedule(", 1)[1].split("\n    def ", 1)[0]
    assert re.search(r"\brequest_queue\b", method) is None  # the shape this test is about
    text = pipeline.generate(upstream)
    compile(text, "<generated>", "exec")
    verified = verify(text, upstream.text)
    assert "delta 3 not needed: the WAITING loop has no request_queue" in verified.summary
    assert f"#   delta 3: no waiting queue breaks instead of asserting -- NOT NEEDED at {tag}\n" in text
    assert "balance delta 3" not in text.split("class BalanceScheduler")[1]
    assert "            return super().schedule()  # balance delta 1" in text
    assert "if self.balance_leader_running == self.max_num_running_reqs:  # balance delta 2" in text
    assert verified.count == "len(self.running)"

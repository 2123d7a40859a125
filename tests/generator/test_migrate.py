"""`migrate`: two verdicts on a hand-kept copy (AST with the deltas out; formatting-only text hunks)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator import pipeline
from generator.cli import main
from generator.migrate import compare_copy
from generator.sources import index, release
from generator.sources.base import UpstreamFile

SEED_GATE = "if max(t.item() for t in self.balance_queue) == self.max_num_running_reqs:"


@pytest.fixture(scope="module")
def generated(upstream_v024: UpstreamFile) -> str:
    return pipeline.generate(upstream_v024)


def test_the_generated_module_is_ast_equal_with_no_text_hunk(generated: str, upstream_v024: UpstreamFile) -> None:
    report = compare_copy(generated, upstream_v024.text)
    assert (report.ast_equal, report.hunks, report.formatting_only) == (True, 0, 0)


def test_the_seeds_gate_and_a_reformat_are_recognised(generated: str, upstream_v024: UpstreamFile) -> None:
    # A hand copy in the seed's form, with one call wrapped differently (what a formatter does).
    copy = generated.replace("if self.balance_leader_running == self.max_num_running_reqs:", SEED_GATE, 1)
    assert SEED_GATE in copy
    target = "        scheduled_new_reqs: list[Request] = []\n"
    assert target in copy
    copy = copy.replace(target, "        scheduled_new_reqs: list[Request] = (\n            []\n        )\n", 1)
    report = compare_copy(copy, upstream_v024.text)
    assert (report.ast_equal, report.hunks, report.formatting_only) == (True, 1, 1)


def test_a_semantic_change_is_named_with_both_lines(generated: str, upstream_v024: UpstreamFile) -> None:
    copy = generated.replace("token_budget -= num_new_tokens", "token_budget -= 2 * num_new_tokens", 1)
    report = compare_copy(copy, upstream_v024.text)
    assert not report.ast_equal
    assert "`token_budget -= 2 * num_new_tokens` is upstream's line" in report.first_difference
    assert report.hunks == 1 and report.formatting_only == 0


def test_cli_exit_codes(generated: str, tmp_path: Path, project: Path) -> None:
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(generated)
    bad.write_text(generated.replace("token_budget -= num_new_tokens", "token_budget = 0", 1))
    ok = CliRunner().invoke(main, ["--root", str(project), "migrate", str(good), "--tag", "v0.24.0"])
    assert ok.exit_code == 0 and "AST (deltas taken out): equal to upstream's" in ok.stdout
    no = CliRunner().invoke(main, ["--root", str(project), "migrate", str(bad), "--tag", "v0.24.0"])
    assert no.exit_code == 1 and "is not upstream" in no.stderr


@pytest.mark.network
def test_vllm_ascends_own_hand_copy_is_ast_equal_and_reformatted() -> None:
    """vllm-ascend 0.24.0rc1's patch_balance_schedule.py (from its wheel on the index) against vLLM v0.24.0."""
    upstream, _ = release.fetch("v0.24.0")
    prefix = "vllm_ascend-0.24.0rc1-cp311-cp311-manylinux"
    wheel = next(f for f in index.list_files("vllm-ascend") if f.filename.startswith(prefix))
    with zipfile.ZipFile(index.RangeReader(wheel.url, wheel.size)) as archive:
        copy = archive.read("vllm_ascend/patch/platform/patch_balance_schedule.py").decode()
    assert SEED_GATE in copy
    report = compare_copy(copy, upstream.text)
    assert report.ast_equal, report.first_difference
    assert report.hunks >= 20 and report.formatting_only >= report.hunks - 3

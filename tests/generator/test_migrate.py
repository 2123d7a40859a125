"""`migrate`: every delta form a hand copy has used, and every verdict, as data cases; then real copies.

``data/migrate/releases/`` are four small vLLM-like releases written for these tests (the shapes of
0.13-0.17, 0.18-0.24, 0.25-0.30, and a patch release whose schedule() did not change). Each
``data/migrate/<case>.py`` is a copy written for these tests (none is taken from vllm-ascend), its
second line naming the release it runs with; ``<case>.report`` is the whole report expected, written
by hand from the two files (line numbers counted in them).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.errors import VerificationFailed
from generator.judge import migrate, provenance
from generator.judge.migrate import judge
from generator.sources import copies, index, release

DATA = Path(__file__).parent / "data" / "migrate"
CASES = sorted(p.stem for p in DATA.glob("*.py"))
RELEASES = [provenance.Release(p.stem, p.read_text()) for p in sorted((DATA / "releases").glob("v*.py"))]
TEXTS = {r.tag: r.text for r in RELEASES}


def _paired(copy: str) -> str:
    match = re.search(r"^# paired with: (v\S+)$", copy, re.MULTILINE)
    assert match is not None
    return match.group(1)


def _judge(case: str) -> migrate.CopyReport:
    copy = (DATA / f"{case}.py").read_text()
    tag = _paired(copy)
    return judge(copy, tag, TEXTS[tag], lambda: RELEASES)


def test_every_form_and_verdict_has_a_case() -> None:
    assert CASES == [
        "balance_flag_pair",
        "balance_flag_pair_wrapped",
        "closest_stale",
        "extra_edits",
        "newer",
        "one_statement_wrapped",
        "seed_gate",
        "stale_copy",
        "unknown_gate",
    ]
    forms = {d.form for case in CASES for d in _judge(case).deltas}
    assert forms == {f.name for f in migrate.copy_forms.FORMS}  # each declared form is exercised
    verdicts = {re.sub(r"v[\d.]+|\d+", "N", _judge(case).verdict) for case in CASES}
    assert verdicts == {
        "equal",
        "a copy of N, N releases stale",
        "a copy of N, N releases newer than N",
        "closest N with N differing statement",
        "closest N with N differing statements",
        "closest N with N differing statement, N releases stale",
    }


@pytest.mark.parametrize("case", CASES)
def test_case_reports_exactly_the_expected_lines(case: str) -> None:
    expected = (DATA / f"{case}.report").read_text().splitlines()
    assert _judge(case).lines() == expected


@pytest.mark.parametrize(
    ("case", "replaceable"),
    [("seed_gate", True), ("balance_flag_pair", True), ("extra_edits", False), ("stale_copy", False)],
)
def test_only_upstream_plus_deltas_alone_is_replaceable(case: str, replaceable: bool) -> None:
    assert _judge(case).replaceable is replaceable


def test_the_scan_is_not_read_when_the_copy_is_the_tags() -> None:
    def no_scan() -> list[provenance.Release]:
        raise AssertionError("the releases were read although the copy is the named tag's")

    copy = (DATA / "seed_gate.py").read_text()
    assert judge(copy, "v1.1.0", TEXTS["v1.1.0"], no_scan).equal


def test_the_generated_modules_are_recognised_in_their_own_form() -> None:
    """This project's output for each family (the hand-checked delta cases) is upstream's plus the deltas."""
    deltas = Path(__file__).parent / "data" / "deltas"
    for case in ("v0_13_family", "v0_24_family", "v0_25_family", "v0_31_family", "v0_34_family"):
        upstream = (deltas / f"{case}.in.py").read_text()
        report = judge((deltas / f"{case}.out.py").read_text(), "v9.9.9", upstream)
        assert report.replaceable, (case, report.lines())
        assert report.gate_differences == () and report.cap_differences == ()
        assert [d.number for d in report.deltas] == ([1, 2, 3] if "assert request_queue" in upstream else [1, 2])
        assert report.gates[0].leader == "self.balance_leader_running"
        assert report.hunks == 0


def test_a_semantic_change_inside_a_block_is_one_extra_edit_with_both_lines() -> None:
    copy = (DATA / "seed_gate.py").read_text().replace("continue", "pass", 1)
    report = judge(copy, "v1.1.0", TEXTS["v1.1.0"], lambda: RELEASES)
    (edit,) = report.extra_edits
    assert edit.describe() == "line 35 `pass` instead of v1.1.0's line 19 `continue`"


def test_a_copy_without_balance_state_is_refused() -> None:
    with pytest.raises(VerificationFailed, match=r"one schedule\(\) that reads balance state"):
        judge(TEXTS["v1.1.0"], "v1.1.0", TEXTS["v1.1.0"])
    with pytest.raises(VerificationFailed, match="does not parse"):
        judge("def (:\n", "v1.1.0", TEXTS["v1.1.0"])


def test_cli_exit_codes_on_a_git_source(tmp_path: Path, project: Path) -> None:
    """Exit 0 only when replaceable; the upstream file comes from a real git repository, not the index."""
    import git

    repo = git.Repo.init(tmp_path / "vllm")
    target = tmp_path / "vllm" / "vllm/v1/core/sched/scheduler.py"
    target.parent.mkdir(parents=True)
    target.write_text(TEXTS["v1.1.0"])
    repo.index.add([str(target)])
    repo.index.commit("v1.1.0")
    repo.create_tag("v1.1.0")
    source = ["--tag", "v1.1.0", "--source", "git", "--vllm-repo", str(tmp_path / "vllm")]
    ok = CliRunner().invoke(main, ["--root", str(project), "migrate", str(DATA / "seed_gate.py"), *source])
    assert ok.exit_code == 0, ok.output
    assert "verdict against vLLM v1.1.0: equal" in ok.stdout and "replace it with the generated module" in ok.stdout
    # Equal, but an edit besides the deltas in the disabled path: not replaceable as is.
    edited = tmp_path / "edited.py"
    edited.write_text(
        (DATA / "seed_gate.py")
        .read_text()
        .replace(
            "            return super().schedule(throttle_prefills)\n",
            "            self.off_steps += 1\n            return super().schedule(throttle_prefills)\n",
        )
    )
    no = CliRunner().invoke(main, ["--root", str(project), "migrate", str(edited), *source])
    assert no.exit_code == 1, no.output
    assert "extra edits: 1\n" in no.stdout and "in the disabled path: line 16 added: `self.off_steps += 1`" in no.stdout
    assert "(equal, 1 extra edits)" in no.stderr


def test_cli_refuses_a_bad_since(project: Path) -> None:
    result = CliRunner().invoke(
        main, ["--root", str(project), "migrate", str(DATA / "seed_gate.py"), "--since", "0.13;rm"]
    )
    assert result.exit_code == 2 and "--since" in result.stderr


@pytest.mark.network
def test_a_real_vllm_ascend_copy_read_from_the_index_is_named_stale() -> None:
    """vllm-ascend 0.25.1rc1's own copy (its wheel, read at test time) runs with vLLM v0.25.1 but is v0.24.0's."""
    wheels = [a for a in copies.artifacts(index.list_files(copies.PROJECT)) if a.version == "0.25.1rc1"]
    assert [a.kind for a in wheels] == ["wheel"]
    data = copies.fetch(wheels[0])
    assert data is not None
    scanned = [provenance.Release(t, release.fetch(t)[0].text) for t in ("v0.24.0", "v0.25.0", "v0.25.1")]
    report = judge(data.decode(), "v0.25.1", scanned[-1].text, lambda: scanned)
    assert report.verdict == "a copy of v0.24.0, 2 releases stale"
    assert report.extra_edits == ()
    assert {d.short for d in report.cap_differences} == {"misses streaming slots", "`==` where upstream has `>=`"}
    assert [(d.number, d.form) for d in report.deltas] == [
        (1, "early return"),
        (2, "one-statement gate"),
        (3, "queue break"),
    ]


@pytest.mark.network
def test_a_real_copy_from_the_wheel_and_from_the_sdist_are_the_same_bytes_and_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both readers (range reads of the wheel; the sdist held to the index's sha256) give one copy."""
    files = index.list_files(copies.PROJECT)
    (wheel,) = [a for a in copies.artifacts(files, "0.13.0rc1") if a.version == "0.13.0rc1"]
    (sdist,) = [f for f in files if f.filename == "vllm_ascend-0.13.0rc1.tar.gz"]
    assert wheel.kind == "wheel"  # a release with a wheel is read from it
    from_wheel = copies.fetch(wheel)
    assert from_wheel is not None and b"balance_queue" in from_wheel
    # The cache holds one entry per release: read the sdist under another, empty one.
    wheel_cache = os.environ["BALANCE_PATCHGEN_CACHE"]
    monkeypatch.setenv("BALANCE_PATCHGEN_CACHE", str(tmp_path / "sdist-cache"))
    assert copies.fetch(copies.Artifact("0.13.0rc1", sdist, "sdist")) == from_wheel
    # Read again: from the cache, without the network.
    monkeypatch.setenv("BALANCE_PATCHGEN_CACHE", wheel_cache)
    monkeypatch.setattr(index, "RangeReader", _no_network)
    assert copies.fetch(wheel) == from_wheel


def _no_network(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("read the network although the copy is cached")


@pytest.mark.network
def test_cli_names_a_real_stale_copy_and_exits_1(tmp_path: Path, project: Path) -> None:
    (artifact,) = [a for a in copies.artifacts(index.list_files(copies.PROJECT)) if a.version == "0.25.1rc1"]
    copy = tmp_path / "patch_balance_schedule.py"
    data = copies.fetch(artifact)
    assert data is not None
    copy.write_bytes(data)
    result = CliRunner().invoke(
        main, ["--root", str(project), "migrate", str(copy), "--tag", "v0.25.1", "--since", "v0.24.0"]
    )
    assert result.exit_code == 1, result.output
    assert f"{copy}: verdict against vLLM v0.25.1: a copy of v0.24.0, 2 releases stale\n" in result.stdout
    assert "upstream v0.25.1's check counts streaming slots" in result.stdout
    assert "not upstream v0.25.1's schedule() plus the balance deltas alone" in result.stderr


def test_a_missing_delta3_says_whether_the_copy_kept_the_assert() -> None:
    older = (DATA / "balance_flag_pair.py").read_text()  # v1.0.0's: no request_queue at all
    report = judge(older, "v1.1.0", TEXTS["v1.1.0"], lambda: RELEASES)
    assert "3 not found: v1.1.0 asserts `assert request_queue is not None`, the copy has neither it nor the break" in (
        report.missing
    )
    assert report.verdict == "a copy of v1.0.0, 1 release stale"


def test_a_named_release_candidate_is_scanned_before_its_final_release() -> None:
    # Staleness counts releases between the copy and the named tag, so the named tag must sit in
    # release order: v0.11.0rc1 before v0.11.0, v0.10.1.post1 before v0.10.1.1.
    releases = [provenance.Release(t, "") for t in ("v0.10.1", "v0.10.1.1", "v0.11.0", "v0.11.1")]
    scanned = migrate._with(releases, provenance.Release("v0.11.0rc1", ""))
    assert [r.tag for r in scanned] == ["v0.10.1", "v0.10.1.1", "v0.11.0rc1", "v0.11.0", "v0.11.1"]
    scanned = migrate._with(releases, provenance.Release("v0.10.1.post1", ""))
    assert [r.tag for r in scanned] == ["v0.10.1", "v0.10.1.post1", "v0.10.1.1", "v0.11.0", "v0.11.1"]


def test_a_method_with_match_statements_is_reduced_with_each_cases_line() -> None:
    """A ``match`` case has no line of its own in ``ast``: its pattern's line stands for it (no crash)."""
    import ast as stdlib_ast

    source = "def schedule(self, x):\n    match x:\n        case 1:\n            return 1\n"
    source += "        case _:\n            pass\n"
    func = stdlib_ast.parse(source).body[0]
    assert isinstance(func, stdlib_ast.FunctionDef)
    reduced = provenance.reduce(func)
    assert [(s.first, s.code) for s in reduced.statements] == [
        (1, "def schedule(self, x):"),
        (2, "match x:"),
        (3, "case 1:"),
        (4, "return 1"),
        (5, "case _:"),
        (6, "pass"),
    ]

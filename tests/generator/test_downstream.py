"""`make downstream`'s harness: what makes a run clean, their tree kept as published, what gets installed."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from balance_dev import downstream

CASES = {
    "passes": "",
    "needs_a_checkout": '<skipped type="pytest.skip" message="no schedule() at the tag (vllm not a git checkout)"/>',
}


def _run(tmp_path: Path, extra: dict[str, str], body: dict[str, object]) -> downstream.Run:
    cases = "".join(
        f'<testcase classname="tests.ut.patch.platform.test_mod" name="{name}">{inner}</testcase>'
        for name, inner in {**CASES, **extra}.items()
    )
    junit = tmp_path / "run.xml"
    junit.write_text(f'<testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>')
    run = downstream.Run("after", body=body)
    downstream.parse_junit(junit, run)
    return run


PIN_COPY = {"tag": "v9.9.9", "copy_is_pin": True}


def test_a_clean_run_has_only_the_git_checkout_skip_and_a_copy_of_the_pin(tmp_path: Path) -> None:
    run = _run(tmp_path, {}, PIN_COPY)
    assert (run.count("passed"), run.count("skipped")) == (1, 1)
    assert run.unexpected() == []


@pytest.mark.parametrize(
    ("extra", "body", "named"),
    [
        ({"breaks": '<failure message="AssertionError: x">trace</failure>'}, PIN_COPY, "test_mod::breaks: failed"),
        ({"collects": '<error message="ImportError: y"/>'}, PIN_COPY, "test_mod::collects: error"),
        ({"waits": '<skipped message="needs an NPU"/>'}, PIN_COPY, "test_mod::waits: skipped: needs an NPU"),
        ({}, {"tag": "v9.9.9", "copy_is_pin": False}, "not v9.9.9's schedule()"),
        ({}, {"error": "the plugin wrote no report"}, "the plugin wrote no report"),
    ],
)
def test_anything_else_makes_the_run_not_clean(
    tmp_path: Path, extra: dict[str, str], body: dict[str, object], named: str
) -> None:
    problems = _run(tmp_path, extra, body).unexpected()
    assert len(problems) == 1 and named in problems[0]


def _sdist(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _tree_members() -> dict[str, bytes]:
    names = [".github/vllm-release-tag.commit", "tests/ut/conftest.py", *downstream.TEST_FILES, "vllm_ascend/x.py"]
    return {f"vllm_ascend-9.9.9/{n}": f"content of {n}\n".encode() for n in names}


def test_the_tree_is_the_sdist_byte_for_byte_plus_build_info_and_fresh_each_time(tmp_path: Path) -> None:
    members = _tree_members()
    dest = tmp_path / "after"
    (dest / "left-over").mkdir(parents=True)  # a previous run's adopted copy must not survive
    tree = downstream.extract_tree(_sdist(members), dest, "9.9.9")
    found = {str(p.relative_to(dest)): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    build_info = "vllm_ascend-9.9.9/vllm_ascend/_build_info.py"
    assert found.pop(build_info) == downstream.BUILD_INFO.encode()
    assert found == members
    assert not (dest / "left-over").exists() and tree == dest / "vllm_ascend-9.9.9"


def test_a_tree_that_ships_build_info_or_escapes_the_folder_is_refused(tmp_path: Path) -> None:
    shipped = {**_tree_members(), "vllm_ascend-9.9.9/vllm_ascend/_build_info.py": b"theirs\n"}
    with pytest.raises(downstream.HarnessError, match="already in the sdist"):
        downstream.extract_tree(_sdist(shipped), tmp_path / "a", "9.9.9")
    with pytest.raises(tarfile.TarError):
        downstream.extract_tree(_sdist({**_tree_members(), "../outside.py": b"x\n"}), tmp_path / "b", "9.9.9")
    assert not (tmp_path / "outside.py").exists()


def test_their_requirements_skip_the_ascend_stack_and_never_move_what_vllm_installed(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text(
        "-r requirements-lint.txt\n# build\ncmake>=3.26\ntorch==2.10.0\ntorch-npu==2.10.0.post4\n"
        "triton-ascend==3.2.2\nscipy\nquart  # prefill\ntransformers==5.14.1\nnumpy\n"
    )
    wanted, notes = downstream.their_requirements(tmp_path, {"transformers": "5.24.0", "numpy": "2.3.5"})
    assert wanted == ["scipy", "quart"]
    assert notes == ["kept transformers 5.24.0 (vLLM's), their requirements.txt asks ==5.14.1"]
    assert downstream.torchvision_for("2.13.0+cpu") == "torchvision==0.28.*"

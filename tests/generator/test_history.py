"""`make history`: which artifact of each vllm-ascend release is read, the pairing, the page it writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.cli import history as history_cli
from generator.errors import SourceUnavailable, UsageError
from generator.judge import history, provenance
from generator.sources import copies
from generator.sources.index import IndexFile

DATA = Path(__file__).parent / "data" / "migrate"
RELEASES = [provenance.Release(p.stem, p.read_text()) for p in sorted((DATA / "releases").glob("v*.py"))]


def _file(name: str) -> IndexFile:
    return IndexFile(filename=name, url=f"https://index.invalid/{name}", sha256="0" * 64, size=1)


def test_one_artifact_per_release_wheel_first_from_the_floor_in_version_order() -> None:
    files = [
        _file("vllm_ascend-0.12.0rc1-cp311-cp311-manylinux_2_24_x86_64.whl"),  # before the floor
        _file("vllm_ascend-0.13.0.tar.gz"),
        _file("vllm_ascend-0.13.0-cp311-cp311-manylinux_2_24_x86_64.whl"),
        _file("vllm_ascend-0.13.0-cp310-cp310-manylinux_2_24_x86_64.whl"),
        _file("vllm_ascend-0.13.0rc1-cp311-cp311-manylinux_2_24_x86_64.whl"),
        _file("vllm_ascend-0.23.0.post1.tar.gz"),  # sdist only
        _file("vllm_ascend-0.23.0-cp311-cp311-manylinux_2_34_x86_64.whl"),
        _file("vllm_ascend-0.9.0rc1-cp310-cp310-manylinux1_x86_64.whl"),
    ]
    found = [(a.version, a.kind, a.file.filename) for a in copies.artifacts(files, "0.13.0rc1")]
    assert found == [
        ("0.13.0rc1", "wheel", "vllm_ascend-0.13.0rc1-cp311-cp311-manylinux_2_24_x86_64.whl"),
        ("0.13.0", "wheel", "vllm_ascend-0.13.0-cp310-cp310-manylinux_2_24_x86_64.whl"),
        ("0.23.0", "wheel", "vllm_ascend-0.23.0-cp311-cp311-manylinux_2_34_x86_64.whl"),
        ("0.23.0.post1", "sdist", "vllm_ascend-0.23.0.post1.tar.gz"),
    ]


@pytest.mark.parametrize(
    ("version", "tag"),
    [("0.13.0rc1", "v0.13.0"), ("0.13.0", "v0.13.0"), ("0.23.0.post1", "v0.23.0"), ("0.26.0rc1", "v0.26.0")],
)
def test_vllm_ascend_x_y_z_runs_vllm_vx_y_z(version: str, tag: str) -> None:
    assert copies.vllm_tag(version) == tag


def test_versions_sort_as_releases_do() -> None:
    versions = ["0.13.0", "0.13.0rc3", "0.13.0.post1", "0.9.2rc1", "0.13.0rc1", "0.14.0rc1"]
    assert sorted(versions, key=copies.version_key) == [
        "0.9.2rc1",
        "0.13.0rc1",
        "0.13.0rc3",
        "0.13.0",
        "0.13.0.post1",
        "0.14.0rc1",
    ]
    with pytest.raises(SourceUnavailable, match="shape"):
        copies.version_key("0.13.0.dev4")


def _artifact(version: str) -> copies.Artifact:
    return copies.Artifact(version, _file(f"vllm_ascend-{version}.tar.gz"), "sdist")


def test_every_release_gets_a_row_and_the_page_keeps_its_own_text() -> None:
    copy = (DATA / "stale_copy.py").read_bytes()
    found = [(_artifact("1.2.1rc1"), copy), (_artifact("1.3.0rc1"), copy), (_artifact("1.1.0"), None)]
    rows = history.judge_all(found, RELEASES)
    assert [(r.version, r.tag, r.report.verdict if r.report else r.note) for r in rows] == [
        ("1.2.1rc1", "v1.2.1", "a copy of v1.1.0, 2 releases stale"),
        ("1.3.0rc1", "v1.3.0", "vLLM v1.3.0 is not among the releases read"),
        ("1.1.0", "v1.1.0", f"ships no `{copies.MEMBER}`"),
    ]
    table = history.render(rows, RELEASES)
    assert table == history.render(history.judge_all(found, RELEASES), RELEASES)  # deterministic
    assert (
        "| 1.2.1rc1 | sdist | v1.2.1 | a copy of v1.1.0, 2 releases stale | 0 | 1 (early return), "
        "2 (one-statement gate), 3 (queue break) | misses streaming slots; `==` where upstream has `>=` "
        "| misses streaming slots; `==` where upstream has `>=` |\n"
    ) in table
    assert "#### vllm-ascend 1.2.1rc1 (sdist), with vLLM v1.2.1\n\n```\nverdict against vLLM v1.2.1:" in table
    page = f"# History\n\nmethod, by hand\n\n{history.BEGIN}\nold table\n{history.END}\n\nafter, by hand\n"
    placed = history.place(page, table)
    assert placed.startswith("# History\n\nmethod, by hand\n\n") and placed.endswith("\n\nafter, by hand\n")
    assert "old table" not in placed and table in placed
    assert history.place(placed, table) == placed  # placing again changes nothing


@pytest.mark.parametrize(
    "page",
    ["no markers\n", f"{history.END}\n{history.BEGIN}\n", f"{history.BEGIN}\n{history.BEGIN}\n{history.END}\n"],
)
def test_a_page_without_its_markers_is_refused(page: str) -> None:
    with pytest.raises(UsageError, match="marker"):
        history.place(page, "table\n")


def test_the_committed_page_has_its_markers() -> None:
    page = (Path(__file__).parents[2] / "docs" / "history.md").read_text()
    assert history.place(page, "x\n").count("x\n") >= 1


def test_run_refuses_a_page_without_markers_before_reading_the_network(tmp_path: Path) -> None:
    page = tmp_path / "history.md"
    page.write_text("# no markers\n")
    assert history_cli.main(["--out", str(page)]) == 2
    assert page.read_text() == "# no markers\n"  # nothing half-written

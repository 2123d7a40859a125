"""``adapt`` end to end on a small vLLM-shaped pair of releases and a plugin tree written here.

The expected tree after ``adapt`` is written out by hand below (AFTER_*): the truth is the test's,
never the code's. Releases are served by the loopback index (``local_index``), as for ``impact``.
"""

from __future__ import annotations

import ast
import os
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from balance_dev.package_index import wheel_name, wheel_of
from generator.cli import main
from generator.judge import census
from generator.tree.adapt import write
from generator.tree.adapt.plan import Plan

UTIL_A = """\
class Helper:
    def run(self):
        return 1


def pick(queue, limit):
    out = []
    for item in queue:
        if len(out) >= limit:
            break
        out.append(item)
    out.sort()
    return out
"""

# B: Helper moved to vllm/core/helper.py; pick's sort became a key sort (a statement the copy did not edit).
UTIL_B = """\
def pick(queue, limit):
    out = []
    for item in queue:
        if len(out) >= limit:
            break
        out.append(item)
    out.sort(key=lambda r: r.priority)
    return out
"""

HELPER_B = """\
class Helper:
    def run(self):
        return 1
"""

SCHED_A = """\
class Scheduler:
    def schedule(self, budget):
        steps = []
        left = budget
        while left > 0:
            steps.append(left)
            left -= 1
        self.steps = steps
        return steps
"""

# B changed the statement the copy also changed (left -= 1): a conflict.
SCHED_B = SCHED_A.replace("left -= 1", "left -= self.stride")

RELEASE_A = {
    "vllm/__init__.py": "",
    "vllm/sched/__init__.py": "",
    "vllm/sched/util.py": UTIL_A,
    "vllm/sched/scheduler.py": SCHED_A,
}
RELEASE_B = {
    "vllm/__init__.py": "",
    "vllm/sched/__init__.py": "",
    "vllm/sched/util.py": UTIL_B,
    "vllm/sched/scheduler.py": SCHED_B,
    "vllm/core/__init__.py": "",
    "vllm/core/helper.py": HELPER_B,
}

USE = """\
import vllm.sched.util
from vllm.sched.util import Helper as H, pick  # both from util at A


def run():
    return vllm.sched.util.Helper().run() + H().run()
"""

AFTER_USE = """\
import vllm.sched.util
import vllm.core.helper
from vllm.sched.util import pick  # both from util at A
from vllm.core.helper import Helper as H


def run():
    return vllm.core.helper.Helper().run() + H().run()
"""

TEST_USE = """\
from unittest import mock


def test_run():
    with mock.patch("vllm.sched.util.Helper.run", return_value=2):
        pass
"""

COPIES = """\
from vllm.sched.scheduler import Scheduler


def pick(queue, limit):
    out = []
    for item in queue:
        if len(out) >= limit:
            break
        # plugin: skip what the device cannot hold
        if item.size > limit:
            continue
        out.append(item)
    out.sort()
    return out


class AscendScheduler(Scheduler):
    def schedule(self, budget):
        steps = []
        left = budget
        while left > 0:
            steps.append(left)
            left -= 2  # plugin: two at a time
        self.steps = steps
        return steps
"""

AFTER_COPIES = COPIES.replace("    out.sort()\n", "    out.sort(key=lambda r: r.priority)\n")


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def tree(tmp_path: Path, local_index: dict[str, bytes]) -> Path:
    for version, files in (("1.0.0", RELEASE_A), ("1.1.0", RELEASE_B)):
        local_index[wheel_name(version)] = wheel_of(version, {k: v.encode() for k, v in files.items()})
    root = _write(tmp_path / "plugin", {"pkg/use.py": USE, "pkg/copies.py": COPIES, "tests/test_use.py": TEST_USE})
    (root / "pkg/latin1.py").write_bytes(b"# caf\xe9\nimport vllm.sched.util\n")
    return root


def _adapt(tree: Path, *extra: str) -> tuple[int, str, str]:
    args = ["--root", str(tree), "adapt", "--from", "v1.0.0", "--to", "v1.1.0", *extra]
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.stdout, result.stderr


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_adapt_rewrites_moved_names_merges_the_clean_copy_and_leaves_the_conflict(tree: Path) -> None:
    before = _snapshot(tree)
    code, out, err = _adapt(tree)
    assert code == 0, err
    assert (tree / "pkg/use.py").read_text() == AFTER_USE
    assert (tree / "tests/test_use.py").read_text() == TEST_USE.replace(
        "vllm.sched.util.Helper.run", "vllm.core.helper.Helper.run"
    )
    assert (tree / "pkg/copies.py").read_text() == AFTER_COPIES
    # The conflicting copy is byte for byte as it was, and the conflict is shown with all three statements.
    assert "left -= 2  # plugin: two at a time" in (tree / "pkg/copies.py").read_text()
    assert "left conflict pkg/copies.py:18 vllm.sched.scheduler.Scheduler.schedule" in out
    assert "left -= self.stride" in out and "upstream's diff:" in out
    assert "re-synced pkg/copies.py:4 vllm.sched.util.pick" in out
    # The file that does not decode is never written.
    assert (tree / "pkg/latin1.py").read_bytes() == before["pkg/latin1.py"]
    for text in ((tree / p).read_text() for p in ("pkg/use.py", "pkg/copies.py", "tests/test_use.py")):
        ast.parse(text)


def test_census_dates_the_merged_copy_b(tree: Path) -> None:
    texts = {"v1.0.0": UTIL_A, "v1.1.0": UTIL_B}
    before = [f for f in census.functions(ast.parse(COPIES), "pkg/copies.py") if f.qualname == "pick"]
    assert census.date(before[0], "vllm/sched/util.py", "pick", texts, "v1.0.0").tag == "v1.0.0"  # type: ignore[union-attr]
    assert _adapt(tree)[0] == 0
    text = (tree / "pkg/copies.py").read_text()
    after = [f for f in census.functions(ast.parse(text), "pkg/copies.py") if f.qualname == "pick"]
    dated = census.date(after[0], "vllm/sched/util.py", "pick", texts, "v1.1.0")
    assert dated is not None and dated.tag == "v1.1.0" and dated.differing == 2  # the plugin's `if` and `continue`


def test_dry_run_prints_the_diff_and_writes_nothing(tree: Path) -> None:
    before = _snapshot(tree)
    code, out, err = _adapt(tree, "--dry-run")
    assert code == 0, err
    assert _snapshot(tree) == before
    assert "+from vllm.core.helper import Helper as H\n" in out
    assert "+    out.sort(key=lambda r: r.priority)\n" in out
    assert "would write 3 files" in err


def test_only_names_leaves_the_copies(tree: Path) -> None:
    assert _adapt(tree, "--only", "names")[0] == 0
    assert (tree / "pkg/copies.py").read_text() == COPIES
    assert (tree / "pkg/use.py").read_text() == AFTER_USE


def test_a_planted_failure_on_the_last_file_leaves_every_file_as_it_was(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _snapshot(tree)
    real = os.replace

    def failing(src: str, dst: str) -> None:
        # The last file's rename (they go in path order): the two before it are already in place.
        if str(dst).endswith("tests/test_use.py"):
            raise OSError(28, "No space left on device", dst)
        real(src, dst)

    monkeypatch.setattr(os, "replace", failing)
    code, _, err = _adapt(tree)
    assert code == 2 and "no space left" in err
    monkeypatch.setattr(os, "replace", real)
    assert _snapshot(tree) == before


def test_a_file_changed_between_reading_and_writing_is_refused(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = write.apply

    def touch_then_apply(plan: Plan) -> None:
        (tree / "pkg/use.py").write_text(USE + "# edited meanwhile\n")
        real(plan)

    monkeypatch.setattr(write, "apply", touch_then_apply)
    code, _, err = _adapt(tree)
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 2 and len(errors) == 1 and "changed on disk since adapt read it" in errors[0]
    assert (tree / "pkg/copies.py").read_text() == COPIES
    assert (tree / "pkg/use.py").read_text() == USE + "# edited meanwhile\n"


def test_to_older_than_from_is_one_line(tree: Path) -> None:
    result = CliRunner().invoke(main, ["--root", str(tree), "adapt", "--from", "v1.1.0", "--to", "v1.0.0"])
    assert result.exit_code == 2 and result.stderr.count("error:") == 1 and "older than --from" in result.stderr

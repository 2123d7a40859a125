"""``adapt`` end to end on a small vLLM-shaped pair of releases and a plugin tree written here.

The releases, the tree and the expected tree after ``adapt`` (AFTER_*) are written out by hand in
``tests/generator/adapt_trees.py``: the truth is the test's, never the code's. Releases are served by the
loopback index (``local_index``), as for ``impact``.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.judge import census
from generator.tree.adapt import write
from generator.tree.adapt.plan import Plan
from tests.generator.adapt_trees import (
    AFTER_COPIES,
    AFTER_USE,
    COPIES,
    TEST_USE,
    USE,
    UTIL_A,
    UTIL_B,
    publish_releases,
    snapshot,
    write_files,
    write_plugin,
)


@pytest.fixture
def tree(tmp_path: Path, local_index: dict[str, bytes]) -> Path:
    publish_releases(local_index)
    return write_plugin(tmp_path / "plugin")


# The one error line of a run that leaves the copy of Scheduler.schedule in conflict, and nothing else.
WORK_LEFT = (
    "balance-patchgen: error: adapt v1.0.0 -> v1.1.0 wrote what it could and left 1 for a person "
    "(1 conflict; listed above as `left`): resolve them in the tree, then run `impact` again"
)


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error:" in line]


def _adapt(tree: Path, *extra: str) -> tuple[int, str, str]:
    args = ["--root", str(tree), "adapt", "--from", "v1.0.0", "--to", "v1.1.0", *extra]
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.stdout, result.stderr


def _adapt_beside_the_conflict(root: Path, files: dict[str, str]) -> str:
    """``files`` added to the shared plugin tree and ``adapt`` run: it exits 1 for the shared tree's copy of
    ``Scheduler.schedule`` (a conflict) and writes the rest; its report."""
    write_files(root, files)
    code, out, err = _adapt(root)
    assert code == 1, err
    return out


def test_adapt_rewrites_moved_names_merges_the_clean_copy_and_leaves_the_conflict(tree: Path) -> None:
    before = snapshot(tree)
    code, out, err = _adapt(tree)
    # Written what could be written, and a person has the conflict to resolve: exit 1, one line saying so.
    assert code == 1, err
    assert _error_lines(err) == [WORK_LEFT]
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
    assert _adapt(tree)[0] == 1  # the other copy's conflict
    text = (tree / "pkg/copies.py").read_text()
    after = [f for f in census.functions(ast.parse(text), "pkg/copies.py") if f.qualname == "pick"]
    dated = census.date(after[0], "vllm/sched/util.py", "pick", texts, "v1.1.0")
    assert dated is not None and dated.tag == "v1.1.0" and dated.differing == 2  # the plugin's `if` and `continue`


def test_dry_run_prints_the_diff_and_writes_nothing(tree: Path) -> None:
    before = snapshot(tree)
    code, out, err = _adapt(tree, "--dry-run")
    # the code the real run gives, and its line in the conditional: nothing was written
    assert code == 1 and _error_lines(err) == [WORK_LEFT.replace(" wrote what", " would write what")]
    assert snapshot(tree) == before
    assert "+from vllm.core.helper import Helper as H\n" in out
    assert "+    out.sort(key=lambda r: r.priority)\n" in out
    assert "would write 3 files" in err


def test_only_names_leaves_the_copies(tree: Path) -> None:
    code, _, err = _adapt(tree, "--only", "names")
    assert code == 0 and not _error_lines(err)  # every moved name rewritten: nothing left for a person
    assert (tree / "pkg/copies.py").read_text() == COPIES
    assert (tree / "pkg/use.py").read_text() == AFTER_USE


def test_a_planted_failure_on_the_last_file_leaves_every_file_as_it_was(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(tree)
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
    assert snapshot(tree) == before


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


def test_names_adapt_cannot_rewrite_or_that_are_gone_are_work_left_exit_1(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    # A has vllm/sched/legacy.py, B has not (nor anything like it): an import of it has no successor.
    publish_releases(local_index, a={"vllm/sched/legacy.py": "def legacy():\n    return 0\n"})
    root = write_plugin(tmp_path / "plugin")
    write_files(
        root,
        {
            "pkg/old.py": "from vllm.sched.legacy import legacy\n",
            # A monkeypatch of a moved name: where the patch must go at B is a person's call.
            "pkg/patches.py": "import vllm.sched.util\n\nvllm.sched.util.Helper = object\n",
        },
    )
    for extra in (("--dry-run",), ()):
        code, out, err = _adapt(root, "--only", "names", *extra)
        assert code == 1, err
        (line,) = _error_lines(err)
        assert "left 2 for a person (2 name;" in line
        report = out if not extra else err
        assert "left name pkg/old.py:1 vllm.sched.legacy.legacy: gone at B" in report
        assert "left name pkg/patches.py:3 vllm.sched.util.Helper: a patch assigns it" in report
    assert (root / "pkg/patches.py").read_text() == "import vllm.sched.util\n\nvllm.sched.util.Helper = object\n"
    assert (root / "pkg/use.py").read_text() == AFTER_USE  # the rest is written


def test_a_version_guard_keeps_the_path_for_a_and_is_no_work(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    publish_releases(local_index)
    root = write_plugin(tmp_path / "plugin")
    guard = (
        "try:\n"
        "    from vllm.sched.util import Helper  # A\n"
        "except ImportError:\n"
        "    from vllm.core.helper import Helper  # B\n"
    )
    write_files(root, {"pkg/guard.py": guard})
    code, out, err = _adapt(root, "--only", "names")
    assert code == 0, err
    assert "left guarded pkg/guard.py:2 vllm.sched.util.Helper: a guard" in out
    assert (root / "pkg/guard.py").read_text() == guard
    assert (root / "pkg/use.py").read_text() == AFTER_USE


def test_a_moved_name_patched_through_a_module_alias_is_reported_not_passed_over(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    publish_releases(local_index)
    root = write_plugin(tmp_path / "plugin")
    patch = "import vllm.sched.util as util\n\nutil.Helper = object\n"
    write_files(root, {"pkg/alias.py": patch})
    code, out, err = _adapt(root, "--only", "names")
    assert code == 1, err
    assert "left name pkg/alias.py:3 vllm.sched.util.Helper: moved to vllm.core.helper.Helper" in out
    assert (root / "pkg/alias.py").read_text() == patch


def test_a_mock_of_the_trees_own_name_is_no_work(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    """``mock.patch("pkg.use.H")`` patches the tree's own name: rewriting the import that binds it is the fix."""
    publish_releases(local_index)
    root = write_plugin(tmp_path / "plugin")
    own = 'from unittest import mock\n\n\ndef test_own():\n    with mock.patch("pkg.use.H"):\n        pass\n'
    write_files(root, {"tests/test_own.py": own})
    code, out, err = _adapt(root, "--only", "names")
    assert code == 0, err
    assert "tests/test_own.py" not in out
    assert (root / "tests/test_own.py").read_text() == own
    assert (root / "pkg/use.py").read_text() == AFTER_USE


def test_a_copy_of_a_method_whose_class_moved_is_re_synced_and_its_import_rewritten(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    """B moves ``Worker`` (and its ``step``) to another module and changes ``step``; the plugin's subclass
    copies ``step`` with an edit of its own. Both go in: the import names B's module, the copy B's change."""
    worker_a = (
        "class Worker:\n"
        "    def step(self, batch):\n"
        "        done = []\n"
        "        for req in batch:\n"
        "            done.append(req)\n"
        "        self.count = len(done)\n"
        "        return done\n"
    )
    counted = "        self.count = len(done)\n"
    worker_b = worker_a.replace(counted, counted + "        self.steps += 1\n")
    publish_releases(local_index, a={"vllm/engine/worker.py": worker_a}, b={"vllm/engine/runner.py": worker_b})
    root = write_plugin(tmp_path / "plugin")
    plugin = (
        "from vllm.engine.worker import Worker\n\n\n"
        "class NpuWorker(Worker):\n"
        "    def step(self, batch):\n"
        "        done = []\n"
        "        for req in batch:\n"
        "            req.to_npu()  # plugin: the device\n"
        "            done.append(req)\n"
        "        self.count = len(done)\n"
        "        return done\n"
    )
    out = _adapt_beside_the_conflict(root, {"pkg/worker.py": plugin})
    want = plugin.replace("from vllm.engine.worker import", "from vllm.engine.runner import")
    want = want.replace(counted, counted + "        self.steps += 1\n")
    assert (root / "pkg/worker.py").read_text() == want
    assert "re-synced pkg/worker.py:5" in out


def test_a_class_of_the_same_name_with_other_members_is_not_where_it_moved(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    """A class gone from its module is found elsewhere at B by its members' names when every method
    changed; a class that only shares the name (other members) is not it: the name is removed."""
    cache_a = "class Pool:\n    def take(self):\n        return 1\n\n    def give(self, x):\n        self.x = x\n"
    moved_b = "class Pool:\n    def take(self):\n        return 2\n\n    def give(self, x):\n        self.y = x\n"
    other_b = "class Pool:\n    def connect(self):\n        return 0\n\n    def close(self):\n        pass\n"
    publish_releases(
        local_index,
        a={"vllm/mem/cache.py": cache_a, "vllm/net/__init__.py": ""},
        b={"vllm/mem/pools.py": moved_b, "vllm/net/__init__.py": "", "vllm/net/conn.py": other_b},
    )
    root = write_plugin(tmp_path / "plugin")
    write_files(root, {"pkg/pool.py": "from vllm.mem.cache import Pool\n"})
    result = CliRunner().invoke(
        main, ["--root", str(root), "impact", "--from", "v1.0.0", "--to", "v1.1.0", "--format", "json"]
    )
    assert result.exit_code == 0, result.stderr
    symbol = json.loads(result.stdout)["symbols"]["vllm.mem.cache.Pool"]
    assert symbol["status"] == "moved" and symbol["moved_to"] == "vllm.mem.pools.Pool"
    # The same tree when B has only the other Pool: nothing of the old one is left.
    local_index.clear()
    publish_releases(
        local_index,
        a={"vllm/mem/cache.py": cache_a, "vllm/net/__init__.py": ""},
        b={"vllm/net/__init__.py": "", "vllm/net/conn.py": other_b},
    )
    result = CliRunner().invoke(
        main, ["--root", str(root), "impact", "--from", "v1.0.0", "--to", "v1.1.0", "--format", "json", "--refresh"]
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["symbols"]["vllm.mem.cache.Pool"]["status"] == "removed"


def test_copies_spelled_before_vllm_respelled_its_annotations(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    """B respells ``rank``'s annotations only, and gives ``pick`` a new parameter and a new statement; the
    plugin copied both with ``Optional``/``List`` and edits of its own. ``pick`` is re-synced with B's
    signature and the copy's edit, ``rank`` is left as it is and reported as unchanged."""
    picker_a = (
        "from typing import List, Optional\n\n\n"
        "def pick(reqs: List[int], limit: Optional[int] = None) -> Optional[int]:\n"
        "    assert all(r >= 0 for r in reqs)\n"
        "    seen = set(reqs)\n"
        "    ordered = sorted(reqs)\n"
        "    if limit is not None:\n"
        "        ordered = ordered[:limit]\n"
        "    ordered = [r for r in ordered if r in seen]\n"
        "    return ordered[0] if ordered else None\n\n\n"
        "def rank(reqs: List[int], weight: Optional[float] = None) -> List[int]:\n"
        "    assert all(r >= 0 for r in reqs)\n"
        "    seen = set(reqs)\n"
        "    scale = weight or 1.0\n"
        "    scored = [r * scale for r in reqs]\n"
        "    scored = [s if r in seen else 0 for r, s in zip(reqs, scored)]\n"
        "    return sorted(range(len(reqs)), key=scored.__getitem__)\n"
    )
    picker_b = (
        picker_a.replace("from typing import List, Optional\n", "")
        .replace("List[int]", "list[int]")
        .replace("Optional[int]", "int | None")
        .replace("Optional[float]", "float | None")
        .replace("limit: int | None = None)", "limit: int | None = None, reverse: bool = False)")
        .replace("    ordered = sorted(reqs)\n", "    ordered = sorted(reqs, reverse=reverse)\n")
    )
    publish_releases(
        local_index,
        a={"vllm/core/__init__.py": "", "vllm/core/picker.py": picker_a},
        b={"vllm/core/picker.py": picker_b},
    )
    root = write_plugin(tmp_path / "plugin")
    plugin = picker_a.replace(  # the copies are A's functions with an edit each
        "ordered = ordered[:limit]\n", "ordered = ordered[: min(limit, 8)]  # plugin: the device holds 8\n"
    ).replace("scale = weight or 1.0\n", "scale = weight or 2.0  # plugin: favour the long ones\n")
    out = _adapt_beside_the_conflict(root, {"pkg/picker.py": plugin})
    want = plugin.replace(
        "def pick(reqs: List[int], limit: Optional[int] = None) -> Optional[int]:\n",
        "def pick(reqs: list[int], limit: int | None = None, reverse: bool = False) -> int | None:\n",
    ).replace("    ordered = sorted(reqs)\n", "    ordered = sorted(reqs, reverse=reverse)\n")
    assert (root / "pkg/picker.py").read_text() == want, out
    assert "re-synced pkg/picker.py:4 vllm.core.picker.pick" in out
    assert "left unchanged pkg/picker.py:14 vllm.core.picker.rank" in out


SPECULATOR_A = (
    "def prepare(batch):\n"
    "    return [r for r in batch if r]\n\n\n"
    "def decode(batch, width):\n"
    "    out = []\n"
    "    for r in batch:\n"
    "        out.append(r * width)\n"
    "    return out\n\n\n"
    "def update(state):\n"
    "    state.step += 1\n"
    "    return state\n"
)


def test_a_module_that_moved_whole_is_imported_from_where_it_went_and_its_patches_follow(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    """B moves ``vllm/spec/ar/speculator.py`` to ``vllm/spec/tdar/speculator.py`` (one body changed on the
    way). The plugin imports the module three ways and patches it through its aliases: every import names
    the new module, the attribute path too, and the patches through the aliases need nothing more."""
    speculator_b = SPECULATOR_A.replace("    state.step += 1\n", "    state.step += state.stride\n")
    publish_releases(
        local_index,
        a={"vllm/spec/__init__.py": "", "vllm/spec/ar/__init__.py": "", "vllm/spec/ar/speculator.py": SPECULATOR_A},
        b={"vllm/spec/__init__.py": "", "vllm/spec/tdar/__init__.py": "", "vllm/spec/tdar/speculator.py": speculator_b},
    )
    root = write_plugin(tmp_path / "plugin")
    plugin = (
        "import vllm.spec.ar.speculator\n"
        "import vllm.spec.ar.speculator as spec_mod  # the decode hook\n"
        "from vllm.spec.ar import speculator as ar_speculator\n\n\n"
        "def fast(batch, *args):\n"
        "    return list(batch)\n\n\n"
        "ar_speculator.prepare = fast\n"
        "spec_mod.decode = fast\n\n\n"
        "def step(state):\n"
        "    return vllm.spec.ar.speculator.update(state)\n"
    )
    out = _adapt_beside_the_conflict(root, {"pkg/spec.py": plugin})
    assert (root / "pkg/spec.py").read_text() == plugin.replace("vllm.spec.ar.", "vllm.spec.tdar.").replace(
        "from vllm.spec.ar import", "from vllm.spec.tdar import"
    )
    assert "pkg/spec.py" not in "\n".join(line for line in out.splitlines() if line.startswith("  left"))


def test_a_module_of_the_same_name_with_other_members_or_there_at_a_is_not_where_it_went(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    other = "def connect():\n    return 0\n\n\ndef close():\n    pass\n"
    publish_releases(
        local_index,
        a={
            "vllm/spec/__init__.py": "",
            "vllm/spec/ar/__init__.py": "",
            "vllm/spec/ar/speculator.py": SPECULATOR_A,
            "vllm/spec/old/__init__.py": "",
            "vllm/spec/old/speculator.py": SPECULATOR_A,
        },
        b={
            "vllm/spec/__init__.py": "",
            "vllm/spec/net/__init__.py": "",
            "vllm/spec/net/speculator.py": other,
            "vllm/spec/old/__init__.py": "",
            "vllm/spec/old/speculator.py": SPECULATOR_A,
        },
    )
    root = write_plugin(tmp_path / "plugin")
    write_files(root, {"pkg/spec.py": "from vllm.spec.ar import speculator\n"})
    result = CliRunner().invoke(
        main, ["--root", str(root), "impact", "--from", "v1.0.0", "--to", "v1.1.0", "--format", "json"]
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["symbols"]["vllm.spec.ar.speculator"]["status"] == "removed"


def test_a_short_function_that_moved_and_changed_is_found_by_its_docstring(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    """B moves ``block_bytes`` (one statement, changed on the way, a new parameter) to another module and
    keeps its docstring: the import names B's module. ``tiny``, whose docstring is too short to say so,
    moved the same way and is ``removed``."""
    said = '    """Bytes one block takes in the shared pool, the divisor of the budget."""\n'
    kv_a = f"def block_bytes(groups):\n{said}    return sum(g.size for g in groups)\n\n\n"
    kv_a += 'def tiny(x):\n    """Tiny."""\n    return x\n'
    plan_b = f"def block_bytes(config, groups):\n{said}    return config.layout.bytes(groups)\n\n\n"
    plan_b += 'def tiny(x, y):\n    """Tiny."""\n    return x + y\n'
    publish_releases(
        local_index,
        a={"vllm/core/__init__.py": "", "vllm/core/kv.py": kv_a},
        b={"vllm/core/kv.py": "", "vllm/core/plan.py": plan_b},
    )
    root = write_plugin(tmp_path / "plugin")
    write_files(root, {"pkg/pool.py": "from vllm.core.kv import block_bytes, tiny\n"})
    result = CliRunner().invoke(
        main, ["--root", str(root), "impact", "--from", "v1.0.0", "--to", "v1.1.0", "--format", "json"]
    )
    assert result.exit_code == 0, result.stderr
    symbols = json.loads(result.stdout)["symbols"]
    assert symbols["vllm.core.kv.block_bytes"]["moved_to"] == "vllm.core.plan.block_bytes"
    assert symbols["vllm.core.kv.tiny"]["status"] == "removed"

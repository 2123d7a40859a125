"""The suite's ``--adapt`` part for real: a small plugin tree's tests at A, at B unadapted, and at B on a copy
``adapt`` rewrote (adapt_trees.py's releases, served by the loopback index; pytest run by the harness).

What each test does at B before and after ``adapt`` is written here by hand: ``pkg.use`` imports ``Helper``
from the module it left at B (its test fails), a test's ``mock.patch`` string names that old path (fails
too); ``adapt`` rewrites both (they pass) and leaves the copy in conflict as it was (its test passes at both).
"""

from __future__ import annotations

import sys
from pathlib import Path

from balance_dev.suite import adapted, run
from tests.generator.adapt_trees import RELEASE_A, RELEASE_B, publish_releases, snapshot, write_files, write_plugin

SITE = Path(__file__).resolve().parents[2] / "balance_dev" / "suite" / "site"
RUN_TEST = """\
from pkg.copies import AscendScheduler
from pkg.use import run


def test_run():
    assert run() == 2


def test_copy_untouched():
    assert AscendScheduler().schedule(4) == [4, 2]
"""


def test_the_suite_after_adapt_beside_the_suite_before(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    publish_releases(local_index)
    tree = write_plugin(tmp_path / "plugin")
    write_files(tree, {"tests/test_run.py": RUN_TEST, "tests/__init__.py": ""})
    env_a = {"PYTHONPATH": f"{SITE}:{write_files(tmp_path / 'A', RELEASE_A)}"}  # the harness's pytest plugins
    env_b = {"PYTHONPATH": f"{SITE}:{write_files(tmp_path / 'B', RELEASE_B)}"}
    work, python, tests = tmp_path / "work", Path(sys.executable), ["tests"]
    work.mkdir()
    before_tree = snapshot(tree)

    at_from = run.run_suite("at-from", python, tree, work, tests, 60, extra_env=env_a)
    at_to = run.run_suite("at-vB", python, tree, work, tests, 60, extra_env=env_b)
    copy, said = adapted.adapt_copy(tree, work, "1.0.0", "1.1.0")
    after = run.run_suite("at-vB-adapted", python, copy, work, tests, 60, extra_env=env_b)

    assert at_from.count("passed") == 3 and not at_from.collect_errors
    assert said["exit"] == 1  # the copy of schedule() is a conflict: work left, the rest written
    assert said["files_changed"] == ["pkg/copies.py", "pkg/use.py", "tests/test_use.py"]  # pick re-synced
    assert snapshot(tree) == before_tree  # the tree itself is never written
    found = adapted.side_by_side(at_from, at_to, after)
    # before: test_run.py does not import (its 2 tests), test_use's mock.patch names the old path
    assert (found["bump_failures_before"], found["bump_failures_after"]) == (3, 0)
    assert (found["fixed_by_adapt"], found["broken_by_adapt"], found["broken_first"]) == (3, 0, [])
    assert sum(found["fixed_by_kind"].values()) == 3 and found["broken_by_kind"] == {}  # type: ignore[attr-defined]


def test_error_kinds_as_python_words_them() -> None:
    kind = adapted.error_kind
    assert kind("TypeError: get_kv() got an unexpected keyword argument 'lookahead'") == "signature"
    assert kind("TypeError: Cls.__init__() missing 1 required positional argument: 'x'") == "signature"
    assert kind("TypeError: f() takes 1 positional argument but 2 were given") == "signature"
    assert kind("TypeError: unsupported operand type(s) for +: 'int' and 'str'") == "TypeError"
    assert kind("ModuleNotFoundError: No module named 'vllm.x'") == "ModuleNotFoundError"


def test_the_spanned_copy_runs_at_a_as_the_tree_did_and_fixes_b(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    """``--span``'s part: the copy after ``adapt --span`` (the tree has its gate helper) at A and at B."""
    utils = "import vllm\n\n\ndef vllm_version_is(v):\n    return vllm.__version__ == v\n"
    publish_releases(local_index)
    tree = write_plugin(tmp_path / "plugin")
    write_files(tree, {"tests/test_run.py": RUN_TEST, "tests/__init__.py": "", "pkg/utils.py": utils})
    a_site = write_files(tmp_path / "A", {**RELEASE_A, "vllm/__init__.py": '__version__ = "1.0.0"\n'})
    b_site = write_files(tmp_path / "B", {**RELEASE_B, "vllm/__init__.py": '__version__ = "1.1.0"\n'})
    env_a, env_b = {"PYTHONPATH": f"{SITE}:{a_site}"}, {"PYTHONPATH": f"{SITE}:{b_site}"}
    work, python, tests = tmp_path / "work", Path(sys.executable), ["tests"]
    work.mkdir()
    at_from = run.run_suite("at-from", python, tree, work, tests, 60, extra_env=env_a)
    at_to = run.run_suite("at-vB", python, tree, work, tests, 60, extra_env=env_b)
    copy, said = adapted.adapt_copy(tree, work, "1.0.0", "1.1.0", span=True)
    assert copy.name == tree.name and copy.parent.name == "tree-spanned"
    assert "gates written" in str(said["said"]) and " 0 gates written" not in str(said["said"])
    span_a = run.run_suite("at-from-spanned", python, copy, work, tests, 60, extra_env=env_a)
    span_b = run.run_suite("at-vB-spanned", python, copy, work, tests, 60, extra_env=env_b)
    found = adapted.spanned(at_from, at_to, span_a, span_b)
    # at A: every test that passed still passes; at B: the tree's 3 bump failures gone, as after plain adapt
    assert (found["new_failures_at_from"], found["bump_failures_at_to"]) == (0, 0)
    assert found["bump_failures_at_to_unspanned"] == 3
    assert found["at_from"]["passed"] == at_from.count("passed") == 3  # type: ignore[index]

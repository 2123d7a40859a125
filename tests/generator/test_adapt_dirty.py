"""``adapt`` and ``bump --adapt`` refuse to write into files with uncommitted changes, as ``cargo fix`` does, so
every write into someone's tree is one reviewable, revertible diff; ``--allow-dirty`` goes on, ``--dry-run``
needs no clean tree. The tree is a real git repository, made here with gitpython."""

from __future__ import annotations

from pathlib import Path

import git
from click.testing import CliRunner, Result

from generator.cli import main
from tests.generator.adapt_trees import publish_releases, snapshot, write_plugin


def _repo(root: Path) -> git.Repo:
    repo = git.Repo.init(root)
    with repo.config_writer() as config:
        config.set_value("user", "name", "plugin")
        config.set_value("user", "email", "plugin@example.invalid")
    repo.git.add(A=True)
    repo.index.commit("the plugin at vLLM A")
    return repo


def _adapt(root: Path, *extra: str) -> Result:
    return CliRunner().invoke(main, ["--root", str(root), "adapt", "--from", "v1.0.0", "--to", "v1.1.0", *extra])


def test_a_dirty_file_adapt_would_write_is_refused_by_name(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    publish_releases(local_index)
    root = write_plugin(tmp_path / "plugin")
    _repo(root)
    (root / "pkg/use.py").write_text((root / "pkg/use.py").read_text() + "# work in progress\n")
    before = snapshot(root)
    result = _adapt(root)
    assert result.exit_code == 2, result.stdout
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "uncommitted changes: pkg/use.py:" in errors[0] and "--allow-dirty" in errors[0]
    assert snapshot(root) == before  # nothing written, the dirty file included
    dry = _adapt(root, "--dry-run")
    assert dry.exit_code == 1 and "+++ b/pkg/use.py" in dry.stdout  # asking first needs no clean tree
    assert snapshot(root) == before
    forced = _adapt(root, "--allow-dirty")
    assert forced.exit_code == 1, forced.stderr  # the shared tree's conflict: the rest written
    assert (root / "pkg/use.py").read_text() != before["pkg/use.py"].decode()


def test_a_clean_tree_and_a_dirty_file_adapt_does_not_write_go_ahead(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    publish_releases(local_index)
    root = write_plugin(tmp_path / "plugin")
    repo = _repo(root)
    (root / "pkg/untouched.py").write_text("X = 1\n")  # untracked, and no file adapt writes
    result = _adapt(root)
    assert result.exit_code == 1, result.stderr  # written, with the shared conflict left
    changed = sorted(item.a_path for item in repo.index.diff(None))
    assert changed == ["pkg/copies.py", "pkg/use.py", "tests/test_use.py"]  # one diff, adapt's alone

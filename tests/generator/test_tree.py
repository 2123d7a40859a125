"""`--root TREE`: the balance copy regenerated inside a vllm-ascend-shaped tree, byte for byte around it.

The trees are written by ``balance_dev.consumer_tree`` (this project's words, upstream's real text
at each tag with the seed's deltas put in by text edits). Each result is judged independently of the
generator: an ``ast`` stripper written here (the seed's three deltas out, upstream's assert back) must
give upstream's ``schedule()``, and everything outside the copy must be the tree's bytes.
"""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from balance_dev import consumer_tree
from generator.cli import main
from generator.sources import cache, release
from generator.sources.base import UpstreamFile

BEGIN = "# >>> balance-patchgen: BalanceScheduler.schedule is vLLM "
END = "# <<< balance-patchgen: end of BalanceScheduler.schedule"


@pytest.fixture(scope="session")
def releases() -> dict[str, UpstreamFile]:
    return {tag: release.fetch(tag)[0] for tag in ("v0.24.0", "v0.27.1")}


@pytest.fixture
def tree(tmp_path: Path, releases: dict[str, UpstreamFile]) -> Path:
    for upstream in releases.values():
        cache.store(upstream.tag, upstream.data)  # the per-test cache: no network in the CLI runs
    return consumer_tree.write(tmp_path / "tree", releases["v0.24.0"].text, "v0.24.0")


def _cli(root: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--root", str(root), *args], catch_exceptions=False)


def _strip_balance(func: ast.FunctionDef) -> ast.FunctionDef:
    """The three deltas out, by what they are (not how the generator writes them)."""

    class Strip(ast.NodeTransformer):
        def visit_If(self, node: ast.If) -> ast.AST | None:
            test = ast.unparse(node.test)
            if "_balance_enabled" in test or "balance_queue" in test:
                return None
            if test == "request_queue is None" and [type(s) for s in node.body] == [ast.Break]:
                return ast.parse("assert request_queue is not None").body[0]
            return self.generic_visit(node)

    result = Strip().visit(copy.deepcopy(func))
    assert isinstance(result, ast.FunctionDef)
    return result


def _method(text: str, cls: str) -> ast.FunctionDef:
    (klass,) = [n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == cls]
    (func,) = [n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == "schedule"]
    return func


def _outside(text: str) -> list[str]:
    lines = text.splitlines()
    begin = next(i for i, line in enumerate(lines) if line.strip().startswith(BEGIN))
    end = next(i for i, line in enumerate(lines) if line.strip() == END)
    return lines[:begin] + lines[end + 1 :]


def _assert_is_upstreams(text: str, upstream: UpstreamFile) -> None:
    ours = _strip_balance(_method(text, "BalanceScheduler"))
    theirs = _method(upstream.text, "Scheduler")
    assert ast.dump(ast.Module(ours.body, [])) == ast.dump(ast.Module(theirs.body, []))
    # Upstream's text, line for line, inside the region (the deltas' own lines aside).
    lines = text.splitlines()
    start, stop = lines.index("    # fmt: off") + 1, lines.index("    # fmt: on")
    region = [line for line in lines[start:stop] if "# balance delta" not in line]
    assert region == [line for line in consumer_tree.method_lines(upstream.text) if "assert request_queue" not in line]


def test_regen_replaces_only_the_copy_and_the_gathered_count(tree: Path, releases: dict[str, UpstreamFile]) -> None:
    patch = tree / consumer_tree.PATCH
    before = patch.read_text()
    result = _cli(tree, "regen")
    assert result.exit_code == 0, result.output
    after = patch.read_text()
    _assert_is_upstreams(after, releases["v0.24.0"])
    head, _, tail = before.partition("    def schedule(")
    assert after.startswith(head) and after.endswith(consumer_tree.TAIL)
    # At v0.24.0 upstream counts len(self.running): the gather needs no change, so nothing outside changed.
    assert _outside(after) == (head + tail[tail.index(consumer_tree.TAIL) :]).splitlines()
    assert "gate form: one-statement gate" in after
    assert "max(t.item() for t in self.balance_queue) == self.max_num_running_reqs:  # balance delta 2" in after
    assert _cli(tree, "check").exit_code == 0
    verified = _cli(tree, "verify")
    assert verified.exit_code == 0 and "balance deltas 1, 2 and 3" in verified.output


def test_bump_moves_the_pin_the_copy_and_the_gathered_count_together(
    tree: Path, releases: dict[str, UpstreamFile]
) -> None:
    assert _cli(tree, "regen").exit_code == 0
    result = _cli(tree, "bump", "v0.27.1")
    assert result.exit_code == 0, result.output
    assert (tree / consumer_tree.PIN).read_text() == "v0.27.1\n"
    after = (tree / consumer_tree.PATCH).read_text()
    _assert_is_upstreams(after, releases["v0.27.1"])
    # 0.25+ counts streaming slots and stops at >=: the gate asks that, and the gather sends that count.
    assert "max(t.item() for t in self.balance_queue) >= self.max_num_running_reqs:" in after
    sent = "torch.tensor([len(self.running) + self.num_waiting_for_streaming_input], dtype=torch.int"
    assert sent in after
    assert "changed outside the copy" in result.output and f"+        running_tensor = {sent}" in result.output
    assert _cli(tree, "check").exit_code == 0
    assert _cli(tree, "verify").exit_code == 0


def test_check_fails_on_a_hand_edit_inside_the_copy_and_ignores_edits_outside(tree: Path) -> None:
    assert _cli(tree, "regen").exit_code == 0
    patch = tree / consumer_tree.PATCH
    regenerated = patch.read_text()
    outside = regenerated.replace("def helper_outside_the_copy() -> int:", "def helper_renamed() -> int:  # edited")
    patch.write_text(outside + "\n\ndef added_later():\n    return 2\n")
    assert _cli(tree, "check").exit_code == 0
    inside = regenerated.replace(
        "        token_budget = self.max_num_scheduled_tokens\n", "        token_budget = 1\n", 1
    )
    assert inside != regenerated
    patch.write_text(inside)
    result = _cli(tree, "check")
    assert result.exit_code == 1
    assert "edited by hand" in result.output and "-        token_budget = 1" in result.output
    assert patch.read_text() == inside  # check writes nothing


def test_check_names_a_copy_not_yet_generated_and_a_stale_pin(tree: Path) -> None:
    result = _cli(tree, "check")
    assert result.exit_code == 1 and "not generated yet" in result.output
    assert _cli(tree, "regen").exit_code == 0
    (tree / consumer_tree.PIN).write_text("v0.27.1\n")
    result = _cli(tree, "check")
    assert result.exit_code == 1 and "is from vLLM v0.24.0, the pin says v0.27.1" in result.output


def _refused(root: Path, *args: str) -> Result:
    result = _cli(root, *args)
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and result.output.startswith("balance-patchgen: error: ")
    return result


def _files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_bad_trees_get_one_line_exit_2_and_nothing_written(tree: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "is no vllm-ascend tree" in _refused(empty, "regen").output

    (tree / consumer_tree.PIN).unlink()
    before = _files(tree)
    assert str(consumer_tree.PIN) in _refused(tree, "regen").output
    assert _files(tree) == before
    (tree / consumer_tree.PIN).write_text("v0.24.0\n")

    patch = tree / consumer_tree.PATCH
    text = patch.read_text()
    patch.write_text(text.replace("    def schedule(", "    def schedule_renamed(", 1))
    before = _files(tree)
    assert "has 0 methods schedule()" in _refused(tree, "regen").output
    assert _files(tree) == before

    patch.write_text(text.replace(consumer_tree.SEED_GATE, "if self.balance_queue_is_full():", 1))
    before = _files(tree)
    assert "in 0 of the forms migrate knows" in _refused(tree, "regen").output
    assert _files(tree) == before


def test_migrate_defaults_to_the_trees_copy(tree: Path) -> None:
    result = _cli(tree, "migrate")
    assert result.exit_code == 0, result.output
    assert "verdict against vLLM v0.24.0: equal" in result.output


def test_this_projects_own_root_is_its_own_layout_not_a_tree() -> None:
    """Its runtime has a patch file where vllm-ascend keeps its copy; the generated module decides."""
    from balance_dev.project_files import REPO_ROOT
    from generator.tree.layout import detect

    assert (REPO_ROOT / consumer_tree.PATCH).is_file()
    assert detect(REPO_ROOT).kind == "project"

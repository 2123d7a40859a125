"""Copies declared as data (balance-patchgen.toml): anchors that match exactly once, edits in the copy's words.

The tree, the spec and the expected results are written here. Each regenerated copy is judged
without the generator: taking the edits' statements back out (by their text, written below) must
leave upstream's ``schedule()`` at the tag, as an ``ast``.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from generator.cli import main
from generator.sources import cache, release
from generator.sources.base import UpstreamFile

FILE = Path("pkg/my_scheduler.py")
HEAD = "from vllm.v1.core.sched.scheduler import Scheduler\n"
CLASS = '''

class MyScheduler(Scheduler):
    """Written for this test: a scheduler that counts its steps and tags its output."""

    def schedule(self, throttle_prefills: bool = False):
        raise NotImplementedError("replaced by balance-patchgen regen")

    def after_the_copy(self) -> int:
        return 3
'''
SPEC = '''
[[copy]]
name = "mine"
upstream = "vllm/v1/core/sched/scheduler.py:Scheduler.schedule"
destination = "pkg/my_scheduler.py:MyScheduler.schedule"

[[copy.edit]]
name = "count steps"
anchor = "preempted_reqs: list[Request] = []"
after = """
self.my_steps = getattr(self, "my_steps", 0) + 1  # counted by MyScheduler
"""

[[copy.edit]]
name = "waiting loop only on even steps"
anchor = """
if not preempted_reqs and self._pause_state == PauseState.UNPAUSED:
    BODY
"""
instead = """
if not preempted_reqs and self._pause_state == PauseState.UNPAUSED and self.my_steps % 2 == 0:
    BODY
"""

[[copy.edit]]
name = "tagged output"
anchor = "scheduler_output = SchedulerOutput(**KWARGS)"
instead = """
scheduler_output = SchedulerOutput(
    **KWARGS,
)
scheduler_output.my_tag = self.my_steps
"""
'''


@pytest.fixture(scope="session")
def v024() -> UpstreamFile:
    return release.fetch("v0.24.0")[0]


@pytest.fixture(scope="session")
def v013() -> UpstreamFile:
    return release.fetch("v0.13.0")[0]


@pytest.fixture
def tree(tmp_path: Path, v024: UpstreamFile, v013: UpstreamFile) -> Path:
    for upstream in (v024, v013):
        cache.store(upstream.tag, upstream.data)
    root = tmp_path / "tree"
    (root / ".github").mkdir(parents=True)
    (root / ".github/vllm-release-tag.commit").write_text("v0.24.0\n")
    (root / FILE).parent.mkdir(parents=True)
    (root / FILE).write_text(HEAD + CLASS)
    (root / "balance-patchgen.toml").write_text(SPEC)
    return root


def _cli(root: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--root", str(root), *args], catch_exceptions=False)


def _method(text: str, cls: str) -> ast.FunctionDef:
    (klass,) = [n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == cls]
    (func,) = [n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == "schedule"]
    return func


def _undo(func: ast.FunctionDef) -> ast.FunctionDef:
    """The three edits taken back out, by their text: what is left must be upstream's."""

    class Undo(ast.NodeTransformer):
        def visit_Assign(self, node: ast.Assign) -> ast.AST | None:
            target = ast.unparse(node.targets[0])
            if target in ("self.my_steps", "scheduler_output.my_tag"):
                return None
            return node

        def visit_If(self, node: ast.If) -> ast.AST:
            test = node.test
            if isinstance(test, ast.BoolOp) and ast.unparse(test.values[-1]) == "self.my_steps % 2 == 0":
                test.values.pop()
            return self.generic_visit(node)

    result = Undo().visit(func)
    assert isinstance(result, ast.FunctionDef)
    return result


def test_regen_applies_each_edit_once_and_check_holds(tree: Path, v024: UpstreamFile) -> None:
    result = _cli(tree, "regen")
    assert result.exit_code == 0, result.output
    text = (tree / FILE).read_text()
    assert text.startswith(HEAD) and text.endswith(CLASS[CLASS.index("    def after_the_copy") :])
    ours, theirs = _method(text, "MyScheduler"), _method(v024.text, "Scheduler")
    assert "# counted by MyScheduler" in text  # the edit's own comment is kept
    # Names the copy reads that the file did not import are imported, from where upstream imports them.
    assert "from vllm.v1.core.sched.output import NewRequestData, SchedulerOutput\n" in text
    assert "adds `from vllm.v1.core.sched.output import NewRequestData, SchedulerOutput`" in result.output
    assert ast.dump(ast.Module(_undo(ours).body, [])) == ast.dump(ast.Module(theirs.body, []))
    # The kwargs are upstream's own text, comments included, not a re-rendering.
    assert "# finished_req_ids is an existing state in the scheduler," in text
    assert _cli(tree, "check").exit_code == 0


def test_an_anchor_gone_at_the_new_tag_exits_4_names_the_edit_and_writes_nothing(tree: Path) -> None:
    assert _cli(tree, "regen").exit_code == 0
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    result = _cli(tree, "bump", "v0.13.0")  # 0.13 WAITING block has no pause state
    assert result.exit_code == 4, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("balance-patchgen: error: "))
    assert "spec 'mine' edit 'waiting loop only on even steps' does not apply to v0.13.0" in line
    assert " | " in result.output  # upstream's numbered lines where it was expected
    assert {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()} == before


def test_an_ambiguous_anchor_exits_4(tree: Path) -> None:
    spec = SPEC + textwrap.dedent("""
        [[copy.edit]]
        name = "everywhere"
        anchor = "break"
        before = "pass"
        """)
    (tree / "balance-patchgen.toml").write_text(spec)
    result = _cli(tree, "regen")
    assert result.exit_code == 4 and "edit 'everywhere'" in result.output and "ambiguous" in result.output


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("[[copy]\n", "is not valid TOML"),
        ("[[copy]]\nname = 'x'\nupstream = 'vllm/v1/core/sched/scheduler.py:Scheduler.schedule'\n", "destination"),
        (SPEC.replace('name = "mine"', 'name = "mine"\ncolour = "red"'), "unknown key 'colour'"),
        (SPEC.replace('anchor = "preempted_reqs: list[Request] = []"', 'anchor = "if x:"'), "does not parse"),
        (SPEC.replace("vllm/v1/core/sched/scheduler.py:", "vllm/other.py:", 1), "cannot be read yet"),
        (SPEC.replace('after = """', 'before = "pass"\nafter = """', 1), "exactly one of"),
    ],
)
def test_a_bad_spec_is_one_line_exit_2(tree: Path, spec: str, says: str) -> None:
    (tree / "balance-patchgen.toml").write_text(spec)
    before = (tree / FILE).read_bytes()
    result = _cli(tree, "regen")
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and says in result.output
    assert (tree / FILE).read_bytes() == before


def test_a_copy_not_generated_yet_before_its_specs_release_is_kept_and_said_so(tree: Path) -> None:
    """`since`: edits written for later releases never rewrite a hand copy at an older pin (nor fail it)."""
    (tree / "balance-patchgen.toml").write_text(SPEC.replace('name = "mine"', 'name = "mine"\nsince = "v0.27.1"'))
    before = (tree / FILE).read_bytes()
    result = _cli(tree, "regen")
    assert result.exit_code == 0, result.output
    assert "is kept as it is: its spec 'mine' is written for vLLM v0.27.1 on, the pin is v0.24.0" in result.output
    assert (tree / FILE).read_bytes() == before
    assert _cli(tree, "check").exit_code == 0


def test_a_hand_kept_copy_is_never_rewritten_and_its_distance_is_reported(tree: Path, v024: UpstreamFile) -> None:
    """The stub in the tree is one statement (`raise`) where upstream has the whole method."""
    spec = '[[copy]]\nname = "kept"\nupstream = "vllm/v1/core/sched/scheduler.py:Scheduler.schedule"\n'
    spec += 'destination = "pkg/my_scheduler.py:MyScheduler.schedule"\nhand_kept = true\n'
    (tree / "balance-patchgen.toml").write_text(spec)
    before = (tree / FILE).read_bytes()
    for command in ("regen", "check"):
        result = _cli(tree, command)
        assert result.exit_code == 0, result.output
        assert "MyScheduler.schedule is hand-kept, " in result.output
        assert "statements from upstream v0.24.0's Scheduler.schedule" in result.output
    assert (tree / FILE).read_bytes() == before


def test_a_multi_line_anchor_is_named_on_one_line() -> None:
    from generator.builder import edits

    assert edits._one_line("(\n    new_blocks,\n    hits,\n) = self.lookup(request)\n") == (
        "(new_blocks, hits,) = self.lookup(request)"
    )
    assert edits._one_line("x = " + "a + " * 40 + "a").endswith("...")
    assert len(edits._one_line("x = " + "a + " * 40 + "a")) == 100

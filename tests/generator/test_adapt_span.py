"""``adapt --span`` keeps A: at A the tree is the code it was, at B the code plain ``adapt`` writes, once the tree's
own version gates are evaluated; and retiring drops the gates no release the tree runs on takes another way.

The shared plugin tree (``adapt_trees``: a moved class imported, reached by an attribute path and a test's
string, a copy that merges and one in conflict) gets a gate helper of its own (``pkg/utils.py``), and a file of
gates dead at A. The truth is this file's own reading of the gates: ``fold`` replaces each call of the helper
with what the installed vLLM would answer and folds what that decides, with stdlib ``ast`` and nothing of
the tool's; the results are compared as ``ast`` sees them.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from balance_dev.adapt_history.gates import ConstantFolding
from generator.cli import main
from tests.generator.adapt_trees import COPIES, USE, publish_releases, snapshot, write_files, write_plugin

UTILS = """\
import vllm


def vllm_version_is(target):
    return vllm.__version__ == target
"""
# Gates the tree keeps at A (1.0.0): 0.9.0 is older than A, dead whichever of A and B runs; 1.0.0 is A.
GATED = """\
from pkg.utils import vllm_version_is

if vllm_version_is("0.9.0"):
    MODE = "old"  # the 0.9 way
elif vllm_version_is("1.0.0"):
    MODE = "a"
else:
    # anything newer
    MODE = "new"

LEGACY = 1 if vllm_version_is("0.9.0") else 2


def pick_mode(flag):
    if not vllm_version_is("0.9.0") and flag:
        return "flagged"
    return MODE
"""


def fold(text: str, version: str) -> ast.Module:
    """The file as the installed vLLM ``version`` runs it: each ``vllm_version_is("X")`` the constant
    ``X == version``, and every ``if``, conditional expression, ``not``, ``and``, ``or`` that decides folded;
    the helper's own import dropped (it decides nothing once folded)."""

    class Fold(ConstantFolding):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id == "vllm_version_is":
                (arg,) = node.args
                assert isinstance(arg, ast.Constant)
                return ast.Constant(arg.value == version)
            return node

        def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST | None:
            if node.module == "pkg.utils":
                return None
            return node

    tree = Fold().visit(ast.parse(text))
    return ast.fix_missing_locations(tree)


def _same(one: str, other: str, version: str) -> bool:
    return ast.dump(fold(one, version)) == ast.dump(fold(other, version))


@pytest.fixture
def trees(tmp_path: Path, local_index: dict[str, bytes]) -> tuple[Path, Path]:
    """The plugin with its gate helper and gated file; and a copy of it for plain ``adapt``."""
    publish_releases(local_index, a={"vllm/__init__.py": '__version__ = "1.0.0"\n'},
                     b={"vllm/__init__.py": '__version__ = "1.1.0"\n'})  # fmt: skip
    root = write_plugin(tmp_path / "plugin")
    write_files(root, {"pkg/__init__.py": "", "pkg/utils.py": UTILS, "pkg/gated.py": GATED})
    plain = tmp_path / "plain"
    shutil.copytree(root, plain)
    return root, plain


def _adapt(root: Path, *extra: str) -> Result:
    return CliRunner().invoke(main, ["--root", str(root), "adapt", "--from", "v1.0.0", "--to", "v1.1.0", *extra])


def test_span_is_the_tree_at_a_and_plain_adapt_at_b(trees: tuple[Path, Path]) -> None:
    root, plain = trees
    before = snapshot(root)
    spanned, planned = _adapt(root, "--span"), _adapt(plain)
    assert spanned.exit_code == planned.exit_code == 1  # the shared copy in conflict, both ways
    assert "gates written" in spanned.stdout and "0 gates written" not in spanned.stdout
    after, after_plain = snapshot(root), snapshot(plain)
    changed = {p for p in after if after[p] != before.get(p)}
    assert {"pkg/use.py", "pkg/copies.py", "tests/test_use.py"} <= changed
    for path in sorted(changed):
        text, was, theirs = after[path].decode(), before[path].decode(), after_plain[path].decode()
        assert _same(text, was, "1.0.0"), f"{path} at A is not the tree's code:\n{text}"
        assert _same(text, theirs, "1.1.0"), f"{path} at B is not plain adapt's:\n{text}\n---\n{theirs}"
    # plain adapt dropped A: its imports of B's paths do not exist at A; span's written file names both
    assert "vllm.sched.util" in after["pkg/use.py"].decode() and "vllm.core.helper" in after["pkg/use.py"].decode()
    assert "from pkg.utils import vllm_version_is" in after["pkg/use.py"].decode()


def test_retiring_keeps_what_each_release_runs(trees: tuple[Path, Path]) -> None:
    root, plain = trees
    result = _adapt(root, "--only", "gates", "--span")
    assert result.exit_code == 0, result.stdout + result.stderr
    text = (root / "pkg/gated.py").read_text()
    assert '"0.9.0"' not in text and 'vllm_version_is("1.0.0")' in text  # dead retired, A's kept (live)
    assert "# anything newer" in text and "# the 0.9 way" not in text
    for version in ("1.0.0", "1.1.0"):
        assert _same(text, GATED, version)
    assert "3 dead gates retired (1 live kept)" in result.stdout
    # plain adapt retires from B on: A's gate is dead there too, and the else's code is what stays
    result = _adapt(plain, "--only", "gates")
    assert result.exit_code == 0, result.stdout
    text = (plain / "pkg/gated.py").read_text()
    assert "vllm_version_is" not in text  # no gate left: its import goes with them
    assert _same(text, GATED, "1.1.0")
    assert "LEGACY = 2" in text and "if flag:" in text


def test_a_tree_with_no_helper_spans_imports_by_try_and_leaves_the_rest(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    publish_releases(local_index)
    root = write_files(tmp_path / "plugin", {"pkg/__init__.py": "", "pkg/use.py": USE, "pkg/copies.py": COPIES})
    result = _adapt(root, "--span")
    assert result.exit_code == 1
    text = (root / "pkg/use.py").read_text()
    assert "try:\n    from vllm.sched.util import pick  # both from util at A\n" in text
    assert "except ImportError:\n    from vllm.sched.util import Helper as H, pick" in text
    assert "vllm.sched.util.Helper().run()" in text  # the attribute path: left, never B's alone
    assert "under --span with no gate helper" in result.stdout
    assert (root / "pkg/copies.py").read_text() == COPIES  # the copy that merges plainly: left


def test_a_declared_helper_the_tree_lacks_is_refused(trees: tuple[Path, Path]) -> None:
    root, _ = trees
    (root / "balance-patchgen.toml").write_text('[gates]\nhelper = "pkg.utils.no_such_helper"\n')
    before = snapshot(root)
    result = _adapt(root, "--span")
    assert result.exit_code == 2
    assert next(line for line in result.stderr.splitlines() if "error:" in line).count("no_such_helper") == 1
    assert snapshot(root) == before


HELPERS = {
    # the shapes a plugin writes its helper in, each with how it compares (by hand)
    "def is_(v):\n    import vllm\n    return vllm.__version__ == v\n": "==",
    (
        "def at_least(v):\n    from importlib.metadata import version\n"
        "    return Version(version('vllm')) >= Version(v)\n"
    ): ">=",
    "def below(v):\n    import vllm\n    return Version(v) > Version(vllm.__version__)\n": "<",
    # vllm-ascend 0.28's: an ``if`` that returns True, a fallback after it
    (
        "def is_(target):\n    import vllm\n    parsed = Version(vllm.__version__)\n"
        "    if parsed == Version(target):\n        return True\n"
        "    if parsed.release[:2] == (0, 1):\n        return fallback(target)\n    return False\n"
    ): "==",
    "def reads_nothing(v):\n    return v == '1'\n": None,
    "def two_ways(v):\n    import vllm\n    return vllm.__version__ == v or vllm.__version__ >= v\n": None,
}


def test_a_helper_is_known_by_what_it_compares() -> None:
    from generator.judge.gates import helper_op

    for code, op in HELPERS.items():
        func = ast.parse(code).body[0]
        assert isinstance(func, ast.FunctionDef)
        assert helper_op(func) == op, code


# A test over several lines inside parentheses, one of its parts a dead gate: what stays keeps them.
SPLIT_TEST = """\
from pkg.utils import vllm_version_is


def pick(a, b, c):
    if a:
        return 1
    elif (
        b
        and c
        and (a or not vllm_version_is("0.9.0"))
    ):
        return 2
    return 3
"""


def test_what_stays_of_a_test_keeps_its_parentheses(trees: tuple[Path, Path]) -> None:
    root, _ = trees
    write_files(root, {"pkg/split.py": SPLIT_TEST})
    result = _adapt(root, "--only", "gates")
    assert result.exit_code == 0, result.stdout + result.stderr
    text = (root / "pkg/split.py").read_text()
    assert "vllm_version_is" not in text
    assert _same(text, SPLIT_TEST, "1.1.0")  # ast.parse inside: it is Python


IMPORTS_ONE_PER_LINE = """\
from pkg.utils import (
    other,
    vllm_version_is,
)
from pkg.utils import vllm_version_is as is_, other as also

X = other if vllm_version_is("0.9.0") else also
Y = 1 if is_("0.9.0") else 2
"""


def test_the_helper_s_import_goes_as_the_file_lays_it_out(trees: tuple[Path, Path]) -> None:
    root, _ = trees
    write_files(root, {"pkg/utils.py": UTILS + "\n\ndef other():\n    pass\n", "pkg/both.py": IMPORTS_ONE_PER_LINE})
    assert _adapt(root, "--only", "gates").exit_code == 0
    text = (root / "pkg/both.py").read_text()
    assert text.startswith("from pkg.utils import (\n    other,\n)\nfrom pkg.utils import other as also\n"), text


def test_a_script_that_imports_nothing_of_the_package_is_left_not_gated(trees: tuple[Path, Path]) -> None:
    # An example run on its own (``python examples/serve.py``, a subprocess of a test) may not have the package
    # where it runs: importing the gate helper into it would break it at A and B both. It is left, said, and
    # the same file in the package is spanned as ever; plain adapt rewrites both.
    root, plain = trees
    for tree in (root, plain):
        write_files(tree, {"examples/serve.py": USE})
    spanned, planned = _adapt(root, "--span"), _adapt(plain)
    assert (root / "examples/serve.py").read_text() == USE
    assert "left unspanned examples/serve.py" in spanned.stdout, spanned.stdout
    assert "imports nothing of pkg" in spanned.stdout
    assert "from pkg.utils import vllm_version_is" in (root / "pkg/use.py").read_text()
    assert (plain / "examples/serve.py").read_text() == (plain / "pkg/use.py").read_text()
    assert planned.exit_code == spanned.exit_code == 1

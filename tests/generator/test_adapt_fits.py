"""A merged copy must fit where it lives: ``adapt`` on copies whose three-way merge is clean but whose result
would raise in the tree's file or class (a name B's module imports, an attribute B's ``__init__`` sets).

Release B adds ``conf: Conf`` to ``build``'s parameters (``Conf`` imported, relatively, in B's module) and a
call of ``_clamp``, a helper B's module defines; ``pick`` reads ``Fast``, which B's module binds in a
``try`` or else to None; and a ``self.scale`` that ``Layer.__init__`` sets and ``forward`` reads. The tree
copies them with edits of its own. Python itself says which naive merges raise, and that what ``adapt``
writes runs as B's functions do: this file writes them out and runs them against B.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from click.testing import CliRunner, Result

from generator.cli import main
from generator.tree.adapt import imports
from tests.generator.adapt_trees import RELEASE_B, publish_releases, write_files

LAYER_A = """\
class Layer:
    def __init__(self):
        self.size = 1

    def forward(self, x):
        y = x + self.size
        z = y * 2
        if z > 100:
            z = 100
        w = z - 1
        return w


def build(n):
    total = n + 1
    double = total * 2
    if double > 50:
        double = 50
    rest = double - 1
    return rest


def pick(n):
    first = n + 1
    second = first * 2
    if second > 70:
        second = 70
    third = second - 3
    return third
"""
LAYER_B = """\
from .conf import Conf

try:
    from vllm.models.fast import Fast
except ImportError:
    Fast = None


class Layer:
    def __init__(self):
        self.size = 1
        self.scale = 3

    def forward(self, x):
        y = x + self.size
        z = y * 2
        if z > 100:
            z = 100
        w = z - self.scale
        return w


def _clamp(value):
    return min(value, 40)


def build(n, conf: Conf = None):
    total = n + 1
    double = total * 2
    if double > 50:
        double = 50
    rest = _clamp(double) - 1
    return rest


def pick(n):
    first = n + 1
    second = first * 2 if Fast is None else Fast(first)
    if second > 70:
        second = 70
    third = second - 3
    return third
"""
TREE = """\
from vllm.models.layer import Layer


def build(n):
    total = n + 1
    double = total * 2
    if double > 50:
        double = 50
    rest = double - 1
    return rest + 0  # plugin: an edit of its own


class NpuLayer(Layer):
    def __init__(self):
        self.size = 2  # plugin: B's __init__ does not run

    def forward(self, x):
        y = x + self.size
        z = y * 2
        if z > 100:
            z = 100
        w = z - 1
        return w + 0  # plugin


class Plain:
    def __init__(self):
        self.ready = True


class CopiedLayer(Plain):  # plugin: Layer's code, not its class
    def __init__(self):
        super().__init__()
        self.size = 2

    def forward(self, x):
        y = x + self.size
        z = y * 2
        if z > 100:
            z = 100
        w = z - 1
        return w + 0  # plugin


class SafeLayer(Layer):
    def __init__(self):
        super().__init__()
        self.size = 2

    def forward(self, x):
        y = x + self.size
        z = y * 2
        if z > 100:
            z = 100
        w = z - 1
        return w + 0  # plugin


def pick(n):
    first = n + 1
    second = first * 2
    if second > 70:
        second = 70
    third = second - 3
    return third + 0  # plugin
"""
RELEASE_A_MORE = {"vllm/models/__init__.py": "", "vllm/models/layer.py": LAYER_A}
RELEASE_B_MORE = {
    "vllm/models/__init__.py": "",
    "vllm/models/layer.py": LAYER_B,
    "vllm/models/conf.py": "class Conf:\n    pass\n",
}


def _python_at_b(tmp: Path, code: str) -> str:
    """What running ``code`` against release B says: "" or the exception's name."""
    root = write_files(tmp / "b-site", {**RELEASE_B, **RELEASE_B_MORE})
    wrapped = f"try:\n{textwrap.indent(code, '    ')}\nexcept Exception as e:\n    print(type(e).__name__)"
    done = subprocess.run(
        [sys.executable, "-c", wrapped], env={"PYTHONPATH": str(root)}, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_naive_merges_raise_where_the_copy_lives(tmp_path: Path) -> None:
    """The premise, from Python: B's changes taken into these copies raise in the tree, except SafeLayer's."""
    head = TREE.split("\n\n\nclass NpuLayer")[0]
    build_naive = head.replace("def build(n):", "def build(n, conf: Conf = None):")
    assert _python_at_b(tmp_path, build_naive) == "NameError"
    calls_clamp = head.replace("    rest = double - 1\n", "    rest = _clamp(double) - 1\n") + "\nbuild(1)\n"
    assert _python_at_b(tmp_path, calls_clamp) == "NameError"
    pick_naive = TREE.replace("    second = first * 2\n", "    second = first * 2 if Fast is None else Fast(first)\n")
    assert _python_at_b(tmp_path, pick_naive + "\npick(1)\n") == "NameError"
    forward_b = "        w = z - self.scale\n"
    naive = TREE.replace("        w = z - 1\n", forward_b)
    assert _python_at_b(tmp_path, naive + "\nNpuLayer().forward(1)\n") == "AttributeError"
    assert _python_at_b(tmp_path, naive + "\nCopiedLayer().forward(1)\n") == "AttributeError"
    assert _python_at_b(tmp_path, naive + "\nSafeLayer().forward(1)\n") == ""


def test_adapt_imports_what_b_module_binds_once_and_leaves_the_rest_as_conflicts(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    publish_releases(local_index, a=RELEASE_A_MORE, b=RELEASE_B_MORE)
    root = write_files(tmp_path / "plugin", {"pkg/__init__.py": "", "pkg/layers.py": TREE})
    result = CliRunner().invoke(main, ["--root", str(root), "adapt", "--from", "v1.0.0", "--to", "v1.1.0"])
    assert result.exit_code == 1, result.stderr
    out = result.stdout
    assert "re-synced pkg/layers.py:4 vllm.models.layer.build" in out
    assert "    added `from vllm.models.conf import Conf`: v1.1.0's function reads it" in out
    assert "    added `from vllm.models.layer import _clamp`: v1.1.0's function reads it" in out
    assert "left conflict pkg/layers.py:17 vllm.models.layer.Layer.forward" in out
    assert "reads self.scale, which the tree's class NpuLayer does not set (B's __init__ sets it" in out
    assert "left conflict pkg/layers.py:36 vllm.models.layer.Layer.forward" in out
    assert "the tree's class CopiedLayer does not set (B's class sets it and CopiedLayer does not derive" in out
    assert "re-synced pkg/layers.py:50 vllm.models.layer.Layer.forward" in out
    assert "left conflict pkg/layers.py:59 vllm.models.layer.pick: merge refused where the copy lives: " in out
    assert "B's function reads Fast, which the tree's file does not bind (and B's module does not bind once" in out
    text = (root / "pkg/layers.py").read_text()
    # build takes B's signature and call with the imports they need; SafeLayer runs B's __init__, so its copy
    # takes B's change; NpuLayer's, CopiedLayer's and pick stay byte for byte
    expected = (
        TREE.replace(
            "from vllm.models.layer import Layer\n",
            "from vllm.models.layer import Layer\n"
            "from vllm.models.conf import Conf\n"
            "from vllm.models.layer import _clamp\n",
        )
        .replace("def build(n):", "def build(n, conf: Conf = None):")
        .replace("    rest = double - 1\n", "    rest = _clamp(double) - 1\n")
    )
    head, safe = expected.split("class SafeLayer")
    assert text == head + "class SafeLayer" + safe.replace("        w = z - 1\n", "        w = z - self.scale\n", 1)
    # what adapt wrote runs at B, and its functions answer as B's do plus the tree's own `+ 0`
    check = "import vllm.models.layer as b\nassert SafeLayer().forward(1) == b.Layer().forward(2) + 0\n"
    check += "assert build(30) == b.build(30) + 0 == 39\n"
    assert _python_at_b(tmp_path, text + "\n" + check) == ""


def test_imports_go_below_the_docstring_and_future_imports_when_no_import_precedes_the_copy() -> None:
    text = '"""Doc."""\n\nfrom __future__ import annotations\n\nX = 1\n\n\ndef f():\n    return g()\n\n\nimport os\n'
    out = imports.insert(text, ["from vllm.models.layer import g"], before=8)
    assert out.splitlines()[:4] == [
        '"""Doc."""',
        "",
        "from __future__ import annotations",
        "from vllm.models.layer import g",
    ]
    assert compile(out, "f.py", "exec")  # a __future__ import must stay first: Python says so


def _adapt_one(
    tmp_path: Path, local_index: dict[str, bytes], module: str, at_a: str, at_b: str, tree: str
) -> tuple[Path, Path, Result]:
    """vllm/models/<module>.py as ``at_a`` in A and ``at_b`` in B, the tree's pkg/<module>.py as ``tree``:
    B's files laid out to run against, the tree, and ``adapt`` A -> B run on it (written)."""
    files_b = {**RELEASE_B_MORE, f"vllm/models/{module}.py": at_b}
    root_b = write_files(tmp_path / "b-site", {**RELEASE_B, **files_b})
    publish_releases(local_index, a={**RELEASE_A_MORE, f"vllm/models/{module}.py": at_a}, b=files_b)
    root = write_files(tmp_path / "plugin", {"pkg/__init__.py": "", f"pkg/{module}.py": tree})
    result = CliRunner().invoke(main, ["--root", str(root), "adapt", "--from", "v1.0.0", "--to", "v1.1.0"])
    assert result.exit_code == 1, result.stderr
    return root_b, root, result


OPS_A = """\
def twice(x):
    return x * 2


def scale(x):
    return x * 2


def grow(n):
    a = n + 1
    b = a * 2
    if b > 9:
        b = 9
    c = scale(b)
    return c


def shrink(n):
    a = n - 1
    b = a // 2
    if b < 0:
        b = 0
    c = b - 1
    return c
"""
OPS_B = (
    OPS_A.replace("def scale(x):\n    return x * 2\n", "def scale(x, factor=2):\n    return x * factor\n")
    .replace("    c = scale(b)\n", "    c = scale(b, 3)\n")
    .replace("    c = b - 1\n", "    c = twice(b) - 1\n")
)
# The tree's own twice and scale (A's signatures), and copies of grow and shrink with an edit each.
OPS_TREE = OPS_A.replace("    return x * 2\n", "    return x + x\n", 1).replace(
    "    return c\n", "    return c + 0  # plugin\n"
)


def test_a_statement_of_b_calling_the_tree_s_own_helper_must_bind_to_its_signature(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    """B's grow calls B's scale with a new argument; in the tree, scale is the tree's own, which refuses it
    (Python says so); B's shrink calls twice, which the tree's own twice takes."""
    naive = OPS_TREE.replace("    c = scale(b)\n", "    c = scale(b, 3)\n")
    ran = subprocess.run([sys.executable, "-c", naive + "\ngrow(1)\n"], capture_output=True, text=True, check=False)
    assert "TypeError" in ran.stderr
    root_b, root, result = _adapt_one(tmp_path, local_index, "ops", OPS_A, OPS_B, OPS_TREE)
    assert (
        "left conflict pkg/ops.py:9 vllm.models.ops.grow: merge refused where the copy lives: B's statements call "
        "scale, which B's module binds to vllm.models.ops.scale and the tree's file to pkg.ops.scale, which takes "
        "1 positional argument(s), 2 given"
    ) in result.stdout
    assert "re-synced pkg/ops.py:18 vllm.models.ops.shrink" in result.stdout
    text = (root / "pkg/ops.py").read_text()
    assert text == OPS_TREE.replace("    c = b - 1\n", "    c = twice(b) - 1\n")
    check = "import vllm.models.ops as b\nassert shrink(9) == b.shrink(9) + 0 == 7\n"
    done = subprocess.run(
        [sys.executable, "-c", text + "\n" + check], env={"PYTHONPATH": str(root_b)}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


RUNNER_A = """\
class Runner:
    def __init__(self):
        self.ctx = None

    def setup(self):
        self.ctx = 5

    def step(self, x):
        a = x + 1
        b = a * 2
        if b > 50:
            b = 50
        c = b - 1
        return c
"""
RUNNER_B = RUNNER_A.replace("        c = b - 1\n", "        c = b - self.ctx\n")
STEP_TREE = (
    "    def step(self, x):\n        a = x + 1\n        b = a * 2\n        if b > 50:\n            b = 50\n"
    "        c = b - 1\n        return c + 0  # plugin\n"
)
RUNNER_TREE = f"""\
from vllm.models.runner import Runner


class NpuRunner(Runner):
    def setup(self):
        self.ready = True  # plugin: its own, B's does not run

{STEP_TREE}

class CallingRunner(Runner):
    def setup(self):
        super().setup()
        self.ready = True

{STEP_TREE}"""


def test_an_attribute_b_sets_in_a_method_the_tree_replaces_is_a_conflict(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    """B's step reads self.ctx, which B's __init__ sets to None and B's setup to its value. NpuRunner replaces
    setup and never sets it: B's change raises there (Python says so); CallingRunner runs B's setup."""
    root_b, root, result = _adapt_one(tmp_path, local_index, "runner", RUNNER_A, RUNNER_B, RUNNER_TREE)
    naive = RUNNER_TREE.replace("        c = b - 1\n", "        c = b - self.ctx\n")
    for cls, raises in (("NpuRunner", True), ("CallingRunner", False)):
        code = f"{naive}\nr = {cls}()\nr.setup()\nr.step(1)\n"
        ran = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(root_b)}, capture_output=True)
        assert (b"TypeError" in ran.stderr) is raises, ran.stderr
    assert (
        "left conflict pkg/runner.py:8 vllm.models.runner.Runner.step: merge refused where the copy lives: B's "
        "function reads self.ctx, which B's setup sets and the tree's class replaces setup without setting it "
        "or calling B's"
    ) in result.stdout
    assert "re-synced pkg/runner.py:22 vllm.models.runner.Runner.step" in result.stdout
    head, calling = RUNNER_TREE.split("class CallingRunner")
    want = head + "class CallingRunner" + calling.replace("        c = b - 1\n", "        c = b - self.ctx\n")
    assert (root / "pkg/runner.py").read_text() == want


def _counting(name: str) -> str:
    return (
        f"def {name}(n):\n    total = n + 1\n    double = total * 2\n    if double > 50:\n        double = 50\n"
        "    rest = double - 1\n    return rest\n"
    )


def test_two_copies_needing_one_name_bound_two_ways_take_the_first_and_leave_the_second(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    """B's one.count and two.tally both gain a ``conf: Conf`` parameter: one's Conf is conf.Conf, two's is its
    own class. A file can bind Conf once: the second copy needing the other one is a conflict."""
    one_b = "from vllm.models.conf import Conf\n\n\n" + _counting("count").replace("(n)", "(n, conf: Conf = None)")
    two_b = "class Conf:\n    pass\n\n\n" + _counting("tally").replace("(n)", "(n, conf: Conf = None)")
    tree = "\n\n".join(
        _counting(n).replace("    return rest\n", "    return rest + 0  # plugin\n") for n in ("count", "tally")
    )
    publish_releases(
        local_index,
        a={**RELEASE_A_MORE, "vllm/models/one.py": _counting("count"), "vllm/models/two.py": _counting("tally")},
        b={**RELEASE_B_MORE, "vllm/models/one.py": one_b, "vllm/models/two.py": two_b},
    )
    root = write_files(tmp_path / "plugin", {"pkg/__init__.py": "", "pkg/both.py": tree})
    result = CliRunner().invoke(main, ["--root", str(root), "adapt", "--from", "v1.0.0", "--to", "v1.1.0"])
    assert result.exit_code == 1, result.stderr
    assert "re-synced pkg/both.py:1 vllm.models.one.count" in result.stdout
    assert (
        "left conflict pkg/both.py:10 vllm.models.two.tally: merge refused where the copy lives: B's function reads "
        "Conf as `from vllm.models.two import Conf`, another copy in the file as `from vllm.models.conf import Conf`"
    ) in result.stdout
    text = (root / "pkg/both.py").read_text()
    assert text.count("import Conf") == 1
    root_b = write_files(tmp_path / "b-site", {**RELEASE_B, **RELEASE_B_MORE, "vllm/models/one.py": one_b})
    check = "import vllm.models.conf as c\nassert count.__annotations__['conf'] is c.Conf\n"
    done = subprocess.run(
        [sys.executable, "-c", text + "\n" + check], env={"PYTHONPATH": str(root_b)}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr

"""``adapt`` writes nothing wrong into a plugin it has never seen: the cases three unseen trees showed, each
written here in this project's words, in the shape of the case.

- a copy of a method whose class still stands at B without it, while another class (another role) has a
  method of that name: reported (``moved?``), never merged against the other class's method; a name with
  a candidate that was there at A already, or with two candidates, is not moved either;
- a merged method that reads what B's ``__init__`` newly sets up (``self.gate.bias``) while the tree's
  ``__init__`` stays as it was: held, naming what it needs; merged with it when the ``__init__`` merges too;
- a merged method that reads a method B gave the copied class, where the tree's class derives from that
  class's vLLM base instead (it copies the class): held; merged where it derives from B's class itself;
- the tree's markers above a statement B changed stay above B's statement;
- a module that moved whole: its import and every dotted use of it in the file rewritten together;
- a path B still reaches through its package's re-export is left; one B no longer reaches is written as
  the package's public path, not the private module's;
- a file of Python 3.12's syntax is read, and written.

Each is held to Python itself where it can be: what ``adapt`` writes is run against release B here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from generator.cli import main
from tests.generator.adapt_trees import RELEASE_B, publish_releases, snapshot, write_files

# A runner whose helper B removed from it; B's new runner package (another role) has a method of that name.
RUNNER_A = """\
class Runner:
    def __init__(self):
        self.graphs = True

    def _num_tokens(self, n):
        if n <= 0:
            return 0
        padded = n + 1
        if padded > 64:
            padded = 64
        total = padded * 2
        return total
"""
RUNNER_B = """\
class Runner:
    def __init__(self):
        self.graphs = True
"""
RUNNER_V2_B = """\
class Runner:
    def _num_tokens(self, n):
        if n <= 0:
            return 0
        padded = n + 1
        if padded > 64:
            padded = 64
        total = padded * 3
        return total
"""
# Two input batches at A; B drops the TPU one: the GPU one, there all along, is not where it went.
BATCH = """\
class Batch:
    def __init__(self, size):
        self.size = size
        self.rows = []
        self.cols = []
        self.done = False

    def add(self, row):
        self.rows.append(row)
"""
TREE_NAMESAKES = """\
from vllm.runner.gpu_runner import Runner
from vllm.tpu_batch import Batch


class MyRunner(Runner):
    def _num_tokens(self, n):
        if n <= 0:
            return 0
        padded = n + 1
        # plugin: graph padding
        if self.graphs:
            padded = padded * 2
        if padded > 64:
            padded = 64
        total = padded * 2
        return total
"""


def _adapt(root: Path, *extra: str) -> Result:
    return CliRunner().invoke(main, ["--root", str(root), "adapt", "--from", "v1.0.0", "--to", "v1.1.0", *extra])


def _runs_at_b(tmp: Path, files: dict[str, str], code: str) -> str:
    """What running ``code`` against release B with ``files`` says: "" or the exception's name."""
    root = write_files(tmp / "b-site", {**RELEASE_B, **files})
    wrapped = "try:\n" + "".join(f"    {line}\n" for line in code.splitlines())
    wrapped += "except Exception as e:\n    print(type(e).__name__)\n"
    done = subprocess.run(
        [sys.executable, "-c", wrapped], env={"PYTHONPATH": str(root)}, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_a_method_another_class_has_is_reported_never_merged(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    a = {"vllm/runner/__init__.py": "", "vllm/runner/gpu_runner.py": RUNNER_A}
    a |= {"vllm/tpu_batch.py": BATCH, "vllm/gpu_batch.py": BATCH}
    b = {"vllm/runner/__init__.py": "", "vllm/runner/gpu_runner.py": RUNNER_B}
    b |= {"vllm/runner/v2/__init__.py": "", "vllm/runner/v2/runner.py": RUNNER_V2_B, "vllm/gpu_batch.py": BATCH}
    publish_releases(local_index, a=a, b=b)
    root = write_files(tmp_path / "plugin", {"pkg/__init__.py": "", "pkg/runner.py": TREE_NAMESAKES})
    before = snapshot(root)
    result = _adapt(root)
    assert result.exit_code == 1, result.stderr  # the Batch import is gone at B: a person's
    assert snapshot(root) == before  # nothing written: neither the copy nor the import has a shown successor
    out = result.stdout
    assert "left removed pkg/runner.py:6 vllm.runner.gpu_runner.Runner._num_tokens: B has no such function" in out
    assert "moved? not shown: B has vllm.runner.v2.runner.Runner._num_tokens" in out
    assert "left name pkg/runner.py:2 vllm.tpu_batch.Batch: gone at B" in out
    assert "0 names rewritten, 0 copies re-synced" in out


MOE_A = """\
class Gate:
    def __init__(self):
        self.weight = 1


class MoE:
    def __init__(self, experts):
        self.experts = experts
        self.gate = Gate()
        self.gate.table = None
        self.top_k = 2
        self.scale = 1.0
        self.shared = None

    def forward(self, x, ids=None):
        if self.gate.table is not None and ids is None:
            raise ValueError("hash routing needs ids")
        out = x * self.scale
        out = out + self.top_k
        if self.shared is not None:
            out = out + self.shared
        return out
"""
MOE_B = MOE_A.replace(
    "        self.gate.table = None\n", "        self.gate.table = None\n        self.gate.bias = None\n"
).replace(
    '            raise ValueError("hash routing needs ids")\n',
    '            raise ValueError("hash routing needs ids")\n'
    "        if self.gate.bias is not None and ids is None:\n"
    '            raise ValueError("vision routing needs ids")\n',
)
# The tree copies the class (not derived from B's): its __init__ changes the line B changed after (a
# conflict), its forward changes a line B did not touch (merges alone).
TREE_MOE = """\
from vllm.models.moe import Gate


class MoE:
    def __init__(self, experts):
        self.experts = experts
        self.gate = Gate()
        self.gate.table = None
        self.gate.hashes = 8  # plugin: where B puts its own new line
        self.top_k = 2
        self.scale = 1.0
        self.shared = None

    def forward(self, x, ids=None):
        if self.gate.table is not None and ids is None:
            raise ValueError("hash routing needs ids")
        out = x * self.scale
        out = out + self.top_k + 0  # plugin
        if self.shared is not None:
            out = out + self.shared
        return out
"""


def test_a_merge_reading_what_another_method_of_b_sets_up_is_held(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    moe = {"vllm/models/__init__.py": "", "vllm/models/moe.py": MOE_A}
    publish_releases(local_index, a=moe, b={**moe, "vllm/models/moe.py": MOE_B})
    # Python's word: forward as B wrote it, in the tree's class with the tree's __init__, raises at B.
    naive = TREE_MOE.replace(
        '            raise ValueError("hash routing needs ids")\n',
        '            raise ValueError("hash routing needs ids")\n'
        "        if self.gate.bias is not None and ids is None:\n"
        '            raise ValueError("vision routing needs ids")\n',
    )
    b_files = {"vllm/models/__init__.py": "", "vllm/models/moe.py": MOE_B}
    assert _runs_at_b(tmp_path, b_files, naive + "\nMoE(4).forward(1, ids=[1])\n") == "AttributeError"
    root = write_files(tmp_path / "plugin", {"pkg/__init__.py": "", "pkg/moe.py": TREE_MOE})
    result = _adapt(root)
    assert result.exit_code == 1, result.stdout
    out = result.stdout
    assert "left conflict pkg/moe.py:14 vllm.models.moe.MoE.forward: merge refused where the copy lives: " in out
    assert "reads self.gate.bias, which B's __init__ sets and the tree's __init__ does not (left as it was)" in out
    assert (root / "pkg/moe.py").read_text() == TREE_MOE

    # When the tree's __init__ takes B's change in the same run, forward may take B's too: both written.
    agreeing = TREE_MOE.replace("        self.gate.hashes = 8  # plugin: where B puts its own new line\n", "")
    agreeing = agreeing.replace("        self.scale = 1.0\n", "        self.scale = 1.0  # plugin: kept\n", 1)
    agreeing = agreeing.replace("        self.experts = experts\n", "        self.experts = list(experts)  # plugin\n")
    root2 = write_files(tmp_path / "plugin2", {"pkg/__init__.py": "", "pkg/moe.py": agreeing})
    result = _adapt(root2)
    assert "re-synced pkg/moe.py:5 vllm.models.moe.MoE.__init__" in result.stdout, result.stdout
    assert "re-synced pkg/moe.py:13 vllm.models.moe.MoE.forward" in result.stdout, result.stdout
    written = (root2 / "pkg/moe.py").read_text()
    assert "self.gate.bias = None" in written and "self.gate.bias is not None" in written
    assert _runs_at_b(tmp_path, b_files, written + "\nassert MoE([4]).forward(1, ids=[1]) == 3\n") == ""


BUFFER_A = """\
class Buffer:
    def __init__(self, size, device):
        self.size = size
        self.cpu = [0] * size
        self.gpu = list(self.cpu)
        self.np = None
        if size > 1024:
            raise ValueError("too large")
"""
BUFFER_B = BUFFER_A.replace("        self.gpu = list(self.cpu)\n", "        self.gpu = [0 for _ in self.cpu]\n")
TREE_BUFFER = """\
from vllm.utils.buffer import Buffer


class MyBuffer(Buffer):
    def __init__(self, size, device):
        self.size = size
        self.cpu = [0] * size
        # plugin begin
        self.cpu = [1] * size
        # plugin end
        self.gpu = list(self.cpu)
        self.np = None
        if size > 1024:
            raise ValueError("too large")
"""


def test_the_tree_markers_stay_above_the_statement_b_changed(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    files = {"vllm/utils/__init__.py": "", "vllm/utils/buffer.py": BUFFER_A}
    publish_releases(local_index, a=files, b={**files, "vllm/utils/buffer.py": BUFFER_B})
    root = write_files(tmp_path / "plugin", {"pkg/__init__.py": "", "pkg/buffer.py": TREE_BUFFER})
    result = _adapt(root)
    assert result.exit_code == 0, result.stderr
    written = (root / "pkg/buffer.py").read_text()
    assert written == TREE_BUFFER.replace(
        "        self.gpu = list(self.cpu)\n", "        self.gpu = [0 for _ in self.cpu]\n"
    )
    assert written.count("# plugin begin") == written.count("# plugin end") == 1


UTILS = """\
current = None


def start(n):
    return n
"""
TREE_PATCHES = """\
import vllm.executor.utils

vllm.executor.utils.current = "plugin"
vllm.executor.utils.start = lambda n: n + 1
"""


def test_a_module_that_moved_whole_takes_every_use_with_its_import(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    publish_releases(
        local_index,
        a={"vllm/executor/__init__.py": "", "vllm/executor/utils.py": UTILS},
        b={"vllm/v1/__init__.py": "", "vllm/v1/executor/__init__.py": "", "vllm/v1/executor/utils.py": UTILS},
    )
    root = write_files(tmp_path / "plugin", {"pkg/__init__.py": "", "pkg/patches.py": TREE_PATCHES})
    result = _adapt(root)
    assert result.exit_code == 0, result.stdout + result.stderr
    written = (root / "pkg/patches.py").read_text()
    assert "vllm.executor.utils" not in written  # no use of the old path left: every one went with the import
    assert written == TREE_PATCHES.replace("vllm.executor.utils", "vllm.v1.executor.utils")
    b_files = {"vllm/v1/__init__.py": "", "vllm/v1/executor/__init__.py": "", "vllm/v1/executor/utils.py": UTILS}
    check = written + "\nimport vllm.v1.executor.utils as u\nassert u.current == 'plugin' and u.start(1) == 2\n"
    assert _runs_at_b(tmp_path, b_files, check) == ""


CONFIG_INIT_A = """\
class Cfg:
    def __init__(self):
        self.seed = 0
        self.name = "cfg"
"""
OLD_A = """\
class Legacy:
    def __init__(self):
        self.mode = "legacy"
        self.level = 1
"""
CONFIG_INIT_B = "from vllm.config.cfg import Cfg\nfrom vllm.config._legacy import Legacy\n"
TREE_CONFIG = """\
from vllm.config import Cfg
from vllm.config.old import Legacy


def make():
    return Cfg(), Legacy()
"""


def test_a_path_b_still_reaches_is_left_and_a_gone_one_is_written_public(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    a = {
        "vllm/config/__init__.py": CONFIG_INIT_A + "\n\n" + "from vllm.config.old import Legacy\n",
        "vllm/config/old.py": OLD_A,
    }
    b = {
        "vllm/config/__init__.py": CONFIG_INIT_B,
        "vllm/config/cfg.py": CONFIG_INIT_A,
        "vllm/config/_legacy.py": OLD_A,
    }
    publish_releases(local_index, a=a, b=b)
    root = write_files(tmp_path / "plugin", {"pkg/__init__.py": "", "pkg/config.py": TREE_CONFIG})
    result = _adapt(root)
    assert result.exit_code == 0, result.stdout + result.stderr
    written = (root / "pkg/config.py").read_text()
    # Cfg is still reached through vllm.config; Legacy's module is gone, and B's package offers it publicly
    assert written == TREE_CONFIG.replace("from vllm.config.old import Legacy", "from vllm.config import Legacy")
    assert _runs_at_b(tmp_path, b, written + "\nmake()\n") == ""


TREE_NEWER = """\
from vllm.executor.utils import start

type Count = int


def twice[T](x: T) -> list[T]:
    return [x, x]


def go(n: Count) -> int:
    return start(n)
"""


def test_a_file_of_python_3_12_is_read_and_written(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    publish_releases(
        local_index,
        a={"vllm/executor/__init__.py": "", "vllm/executor/utils.py": UTILS},
        b={"vllm/v1/__init__.py": "", "vllm/v1/executor/__init__.py": "", "vllm/v1/executor/utils.py": UTILS},
    )
    root = write_files(tmp_path / "plugin", {"pkg/__init__.py": "", "pkg/newer.py": TREE_NEWER})
    impact = CliRunner().invoke(main, ["--root", str(root), "impact", "--from", "v1.0.0", "--to", "v1.1.0"])
    assert impact.exit_code == 0, impact.stderr
    assert "pkg/newer.py needs Python 3.12 (a type statement, type parameters); read with libcst" in impact.stdout
    assert "skipped" not in impact.stdout.split("\n")[3]
    result = _adapt(root)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert (root / "pkg/newer.py").read_text() == TREE_NEWER.replace(
        "from vllm.executor.utils import start", "from vllm.v1.executor.utils import start"
    )


# B's info class gains a helper its changed method calls; the plugin's class copies that method but derives
# from vLLM's base class of it, which has no such helper.
INFO_A = """\
class BaseInfo:
    def __init__(self, ctx):
        self.ctx = ctx


class VideoInfo(BaseInfo):
    def placeholder(self, frames):
        if frames <= 0:
            return []
        width = self.ctx * 2
        height = width + 1
        if height > 64:
            height = 64
        return [width] * frames
"""
INFO_B = INFO_A.replace(
    "        return [width] * frames\n",
    "        return [width + self._second(i) for i in range(frames)]\n\n    def _second(self, i):\n        return i\n",
)
TREE_INFO = """\
from vllm.models.info import BaseInfo


class VideoInfo(BaseInfo):
    def placeholder(self, frames):
        if frames <= 0:
            return []
        width = self.ctx * 2
        height = width + 1
        if height > 32:  # plugin: smaller frames
            height = 32
        return [width] * frames
"""


def test_a_merge_reading_a_method_b_gave_the_copied_class_is_held_where_the_tree_derives_from_its_base(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    files = {"vllm/models/__init__.py": ""}
    publish_releases(
        local_index,
        a={**files, "vllm/models/info.py": INFO_A},
        b={**files, "vllm/models/info.py": INFO_B},
    )
    b_files = {**files, "vllm/models/info.py": INFO_B}
    # Python's word: B's statement in the tree's class (whose base is B's BaseInfo) raises at B.
    naive = TREE_INFO.replace(
        "        return [width] * frames\n",
        "        return [width + self._second(i) for i in range(frames)]\n",
    )
    assert _runs_at_b(tmp_path, b_files, naive + "\nVideoInfo(1).placeholder(2)\n") == "AttributeError"
    root = write_files(tmp_path / "plugin", {"pkg/__init__.py": "", "pkg/info.py": TREE_INFO})
    result = _adapt(root)
    out = result.stdout
    assert "left conflict pkg/info.py:5 vllm.models.info.VideoInfo.placeholder: merge refused" in out, out
    assert "reads self._second, which the tree's class VideoInfo does not set" in out, out
    assert (root / "pkg/info.py").read_text() == TREE_INFO

    # Deriving from B's class itself, the helper is inherited: merged, and it runs at B.
    deriving = TREE_INFO.replace("import BaseInfo", "import VideoInfo as Info").replace("(BaseInfo)", "(Info)")
    root2 = write_files(tmp_path / "plugin2", {"pkg/__init__.py": "", "pkg/info.py": deriving})
    result = _adapt(root2)
    assert "re-synced pkg/info.py:5 vllm.models.info.VideoInfo.placeholder" in result.stdout, result.stdout
    written = (root2 / "pkg/info.py").read_text()
    assert "self._second(i)" in written
    assert _runs_at_b(tmp_path, b_files, written + "\nassert VideoInfo(1).placeholder(2) == [2, 3]\n") == ""

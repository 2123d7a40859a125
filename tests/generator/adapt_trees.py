"""A small vLLM-shaped pair of releases and a plugin tree, written here, that ``adapt`` and ``bump --adapt`` run on.

Release A has ``Helper`` in ``vllm/sched/util.py``; B moved it to ``vllm/core/helper.py`` and changed
``pick``'s sort; ``Scheduler.schedule`` changed the statement the plugin's copy also changed (a
conflict). The expected tree after ``adapt`` is written out by hand (``AFTER_*``): the truth is the
tests', never the code's. Releases are wheels built here, served by the loopback index (``local_index``).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from balance_dev.package_index import wheel_name, wheel_of

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


def write_files(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


def publish_releases(index: dict[str, bytes], a: dict[str, str] | None = None, b: dict[str, str] | None = None) -> None:
    """v1.0.0 (A) and v1.1.0 (B) on the index, each with ``a``/``b``'s files besides its own."""
    for version, files in (("1.0.0", {**RELEASE_A, **(a or {})}), ("1.1.0", {**RELEASE_B, **(b or {})})):
        index[wheel_name(version)] = wheel_of(version, {k: v.encode() for k, v in files.items()})


def write_plugin(root: Path) -> Path:
    """The plugin tree: moved names in code and in a test's string, two copies, a file that is not UTF-8."""
    write_files(root, {"pkg/use.py": USE, "pkg/copies.py": COPIES, "tests/test_use.py": TEST_USE})
    (root / "pkg/latin1.py").write_bytes(b"# caf\xe9\nimport vllm.sched.util\n")
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

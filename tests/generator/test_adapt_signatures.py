"""``adapt`` gives the tree's functions that B's code calls in place of its own the parameters B's calls pass.

The releases and the tree are written here, in the shape of the cases a plugin's suite showed: a patched
module function that forwards through keyword dicts to the original it saved and to its own subclass; an
override calling ``super()`` whose parameter B renamed and after which B added one; a staticmethod patch that
calls the original positionally; an override forwarding a parameter B removed; a subclass ``__init__`` that
builds a vLLM object whose constructor B changed the same way; and the cases left for a person (a parameter
with no default, a function forwarding nothing of what B added).

The truth is Python's: B's own calling code, which this file writes, is run against the adapted tree (every
call B makes binds to what ``adapt`` wrote), with values that show each forwarded parameter arrived (what
the tree forwarded at A still arrives, and what B added too). Under ``--span`` the same tree runs at A and at B.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from generator.cli import main
from tests.generator.adapt_trees import RELEASE_A, RELEASE_B, publish_releases, snapshot, write_files

POOL_A = """\
class Pool:
    def __init__(self, size, caching=True):
        self.size = size
        self.caching = caching
        self.lookahead = None
"""
POOL_B = """\
class Pool:
    def __init__(self, size, caching=True, lookahead=0):
        self.size = size
        self.caching = caching
        self.lookahead = lookahead
"""
COORD_A = """\
from vllm.core.pool import Pool


class Coordinator:
    def __init__(self, size, caching=True):
        self.pool = Pool(size, caching=caching)


def make_coordinator(size, caching=True, metrics=None):
    return Coordinator(size, caching=caching)
"""
COORD_B = """\
from vllm.core.pool import Pool


class Coordinator:
    def __init__(self, size, caching=True, lookahead=0):
        self.pool = Pool(size, caching=caching, lookahead=lookahead)


def make_coordinator(size, caching=True, metrics=None, lookahead=0):
    return Coordinator(size, caching=caching, lookahead=lookahead)
"""
MANAGER_A = """\
from vllm.core import coord


class Manager:
    def __init__(self, size):
        self.coordinator = coord.make_coordinator(size, caching=False)
"""
MANAGER_B = """\
from vllm.core import coord


class Manager:
    def __init__(self, size):
        self.coordinator = coord.make_coordinator(size, caching=False, lookahead=3)
"""
RUNNER_A = """\
class Runner:
    def execute(self, batch, sync=None):
        return ("executed", batch, sync)

    def load(self, path, strict=True):
        return (path, strict)

    def plan(self, n):
        return n

    def sizes(self):
        return [8]

    def step(self, batch):
        return self.execute(batch, sync=1), self.load("w")

    def shapes(self):
        return self.sizes()
"""
# B renamed ``sync`` (its place and default kept, its body reading the new name), added ``randomize`` after it
# and passes both; dropped ``strict``; added ``budget`` with no default to ``plan``; ``spec`` to ``sizes``.
RUNNER_B = """\
class Runner:
    def execute(self, batch, sync_state=None, randomize=False):
        return ("executed", batch, sync_state, randomize)

    def load(self, path):
        return (path,)

    def plan(self, n, budget):
        return min(n, budget)

    def sizes(self, spec=None):
        return [8 if spec is None else spec]

    def step(self, batch):
        return self.execute(batch, sync_state=1, randomize=True), self.load("w")

    def shapes(self):
        return self.sizes(16)
"""
CONFIG_A = """\
class Config:
    @staticmethod
    def override(cfg):
        return dict(cfg)


def build(cfg):
    return Config.override(cfg)
"""
CONFIG_B = """\
class Config:
    @staticmethod
    def override(cfg, extra=None):
        return {**cfg, **(extra or {})}


def build(cfg):
    return Config.override(cfg, {"b": 2})
"""
A_FILES = {
    "vllm/core/__init__.py": "",
    "vllm/core/pool.py": POOL_A,
    "vllm/core/coord.py": COORD_A,
    "vllm/core/manager.py": MANAGER_A,
    "vllm/worker/__init__.py": "",
    "vllm/worker/runner.py": RUNNER_A,
    "vllm/config.py": CONFIG_A,
}
B_FILES = {
    **A_FILES,
    "vllm/core/pool.py": POOL_B,
    "vllm/core/coord.py": COORD_B,
    "vllm/core/manager.py": MANAGER_B,
    "vllm/worker/runner.py": RUNNER_B,
    "vllm/config.py": CONFIG_B,
}

# The tree: a replacement of make_coordinator forwarding in keyword dicts (one filled line by line) to the
# saved original and to its own subclass, whose __init__ builds B's Pool as B's does.
TREE_COORD = """\
import vllm.core.coord as coord_module
from vllm.core.coord import Coordinator
from vllm.core.pool import Pool

_orig_make_coordinator = coord_module.make_coordinator


class PluginCoordinator(Coordinator):
    def __init__(self, size, caching=True):
        self.pool = Pool(size, caching=caching)
        self.plugin = True


def make_coordinator(
    size,
    caching=True,
    metrics=None,
):
    own = dict(
        size=size,
        caching=caching,
    )
    if metrics is not None:
        return PluginCoordinator(**own)
    orig_kwargs = dict(size=size)
    orig_kwargs["caching"] = caching
    orig_kwargs["metrics"] = metrics
    return _orig_make_coordinator(**orig_kwargs)


coord_module.make_coordinator = make_coordinator
"""
TREE_RUNNER = """\
from vllm.worker.runner import Runner


class PluginRunner(Runner):
    def execute(self, batch, sync=None):
        # plugin: a synced batch is shifted
        if sync is not None:
            batch = batch + 100
        return super().execute(batch, sync=sync)

    def load(self, path, strict=True):
        return super().load(path, strict=strict)

    def plan(self, n):
        return n

    def sizes(self):
        return [32]
"""
TREE_CONFIG = """\
from vllm.config import Config

_orig_override = Config.override


def _override(cfg):
    cfg = _orig_override(cfg)
    return {**cfg, "plugin": True}


Config.override = staticmethod(_override)
"""
TREE = {
    "pkg/__init__.py": "",
    "pkg/coord.py": TREE_COORD,
    "pkg/runner.py": TREE_RUNNER,
    "pkg/config.py": TREE_CONFIG,
}
# B's own code, driving each function of the tree the way B calls what it replaces.
AT_B = """\
import pkg.coord, pkg.config
from pkg.coord import make_coordinator
from pkg.runner import PluginRunner
from vllm.core.manager import Manager
from vllm.config import build

pool = Manager(4).coordinator.pool
print("manager", pool.size, pool.caching, pool.lookahead)
mine = make_coordinator(5, caching=False, metrics=1, lookahead=7)
print("own", type(mine).__name__, mine.pool.caching, mine.pool.lookahead)
print("runner", PluginRunner().step(1))
print("config", sorted(build({"a": 1}).items()))
"""
EXPECTED_AT_B = [
    "manager 4 False 3",  # the original took lookahead from the dict the tree fills; caching still arrives
    "own PluginCoordinator False 7",  # the tree's subclass took it and built B's Pool with it
    # the renamed parameter read under B's name, B's new one forwarded; load no longer passes strict
    "runner (('executed', 101, 1, True), ('w',))",
    "config [('a', 1), ('b', 2), ('plugin', True)]",  # B's positional extra reached the original
]


def _adapt(root: Path, *extra: str) -> Result:
    return CliRunner().invoke(main, ["--root", str(root), "adapt", "--from", "v1.0.0", "--to", "v1.1.0", *extra])


def _run(tmp: Path, release: dict[str, str], tree: Path, code: str, version: str) -> list[str]:
    """``code`` run against a release's files (its ``vllm.__version__`` set) and the tree: what it printed."""
    site = write_files(tmp / f"site-{version}", {**release, "vllm/__init__.py": f'__version__ = "{version}"\n'})
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": f"{tree}:{site}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def _releases(index: dict[str, bytes]) -> None:
    publish_releases(index, a=A_FILES, b=B_FILES)


def test_b_calls_bind_to_what_adapt_writes_and_each_parameter_arrives(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    _releases(local_index)
    root = write_files(tmp_path / "plugin", TREE)
    # Before: B's calls refuse the tree's functions (Python's word, not the tool's).
    before = subprocess.run(
        [sys.executable, "-c", AT_B],
        env={"PYTHONPATH": f"{root}:{write_files(tmp_path / 'b0', {**RELEASE_B, **B_FILES})}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert "unexpected keyword argument 'lookahead'" in before.stderr
    result = _adapt(root, "--only", "signatures")
    assert result.exit_code == 1, result.stdout + result.stderr  # plan and sizes are a person's
    assert _run(tmp_path, {**RELEASE_B, **B_FILES}, root, AT_B, "1.1.0") == EXPECTED_AT_B
    out = result.stdout
    assert "left parameter pkg/runner.py:14 vllm.worker.runner.Runner.plan: B added budget with no default" in out
    assert "left parameter pkg/runner.py:17 vllm.worker.runner.Runner.sizes: B added spec=None" in out
    assert "forwards nothing of it" in out
    text = (root / "pkg/runner.py").read_text()
    assert "def plan(self, n):" in text and "def sizes(self):" in text  # what is left is not written
    assert "# plugin: a synced batch is shifted" in text  # the function's comment stays


def test_the_layout_of_each_list_is_kept(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    _releases(local_index)
    root = write_files(tmp_path / "plugin", TREE)
    assert _adapt(root, "--only", "signatures").exit_code == 1
    text = (root / "pkg/coord.py").read_text()
    # one per line where the tree writes one per line; a dict gets the new key, off B's default, after the line
    # that last fills it (or makes it)
    assert "    metrics=None,\n    lookahead=0,\n):" in text
    assert (
        '    orig_kwargs["metrics"] = metrics\n    if lookahead != 0:\n        orig_kwargs["lookahead"] = lookahead\n'
    ) in text
    assert '    )\n    if lookahead != 0:\n        own["lookahead"] = lookahead\n' in text
    assert 'Pool(size, caching=caching, **({} if lookahead == 0 else {"lookahead": lookahead}))' in text


# A test of the tree's (its own business) that stands a fake of A's shape in for what the function wraps, and
# calls the function as A's callers did: at B's default the wrapped call is what it was, so the fake still fits.
A_SHAPED_FAKE = """from vllm.worker.runner import Runner
from pkg.runner import PluginRunner

Runner.execute = lambda self, batch, sync=None: ("fake", batch, sync)
print("fake", PluginRunner().execute(1, sync=2))
"""


def test_a_fake_of_a_s_shape_still_fits_at_the_default(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    _releases(local_index)
    root = write_files(tmp_path / "plugin", TREE)
    assert _adapt(root, "--only", "signatures").exit_code == 1
    code = A_SHAPED_FAKE.replace("sync=2", "sync_state=2")  # the tree's function takes B's name now
    fake = code.replace("sync=None", "sync_state=None").replace('("fake", batch, sync)', '("fake", batch, sync_state)')
    assert _run(tmp_path, {**RELEASE_B, **B_FILES}, root, fake, "1.1.0") == ["fake ('fake', 101, 2)"]


def test_span_runs_at_a_as_it_did_and_at_b_as_plain_adapt(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    _releases(local_index)
    utils = "import vllm\n\n\ndef vllm_version_is(v):\n    return vllm.__version__ == v\n"
    root = write_files(tmp_path / "plugin", {**TREE, "pkg/utils.py": utils})
    at_a = AT_B.replace("lookahead=7", "").replace("mine.pool.lookahead", "None")
    was = _run(tmp_path / "a0", {**RELEASE_A, **A_FILES}, root, at_a, "1.0.0")
    result = _adapt(root, "--only", "signatures", "--span")
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "gates written" in result.stdout and " 0 gates written" not in result.stdout
    assert _run(tmp_path / "a1", {**RELEASE_A, **A_FILES}, root, at_a, "1.0.0") == was
    assert _run(tmp_path / "b1", {**RELEASE_B, **B_FILES}, root, AT_B, "1.1.0") == EXPECTED_AT_B
    # A rename is gated whole (A's callers use the old name); a parameter added after the others, sent on only
    # off B's default, is written once: no call of A's reaches it, and each def stays where it was.
    assert 'if vllm_version_is("1.0.0"):' in (root / "pkg/runner.py").read_text()
    coord = (root / "pkg/coord.py").read_text()
    assert "vllm_version_is" not in coord and "lookahead" in coord


def test_span_with_no_helper_writes_no_signature(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    _releases(local_index)
    root = write_files(tmp_path / "plugin", TREE)
    before = snapshot(root)
    result = _adapt(root, "--only", "signatures", "--span")
    assert result.exit_code == 1
    assert snapshot(root) == before
    assert "under --span with no version gate helper" in result.stdout


def test_a_plain_run_at_a_is_not_required_to_hold(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    """Plain ``adapt`` writes B's form: the parameter B renamed is taken under B's name, which A's callers do
    not pass (that is what ``--span`` is for). Shown so the span test above can fail. What B added is sent on
    only off its default, so A's original still takes a call at the default."""
    _releases(local_index)
    root = write_files(tmp_path / "plugin", TREE)
    assert _adapt(root, "--only", "signatures").exit_code == 1
    site = write_files(tmp_path / "a", {**RELEASE_A, **A_FILES, "vllm/__init__.py": ""})
    code = "import pkg.coord\nfrom vllm.core.manager import Manager\nManager(4)\n"
    code += "from pkg.runner import PluginRunner\nPluginRunner().step(1)\n"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": f"{root}:{site}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert "execute() got an unexpected keyword argument 'sync'" in done.stderr


def test_required_and_unforwarded_are_named_with_both_signatures_in_the_plan(
    tmp_path: Path, local_index: dict[str, bytes]
) -> None:
    _releases(local_index)
    root = write_files(tmp_path / "plugin", TREE)
    result = _adapt(root, "--only", "signatures", "--dry-run")
    assert result.exit_code == 1
    out = result.stderr  # a dry run's report; its diff is the output
    assert "+    def execute(self, batch, sync_state=None, randomize=False):" in result.stdout
    assert "    A: def plan(self, n):" in out and "    B: def plan(self, n, budget):" in out
    assert "followed pkg/runner.py:5 vllm.worker.runner.Runner.execute (B's signature):" in out
    assert "renamed sync -> sync_state (B's name), where the body reads it" in out
    assert "passes sync_state= to super().execute(...)" in out
    assert "no longer passes strict (B removed it) to super().load(...)" in out
    assert "forwarded lookahead to Pool(...)" in out  # B changed Pool's constructor the same way
    assert "left 2 for a person (2 parameter;" in out

"""What vLLM B's own code does to a tree: its calls of the tree's functions, its reads of the tree's objects,
the targets of the tree's test patches, the tree's own version gates. Each rule on a small vLLM-shaped tree
between two small releases written here.

The truth is Python's: every case below is also a statement (``TRUTH``), run against each release in a
fresh interpreter with the tree on its path. A ``breaks`` verdict must be exactly where the statement runs
at A and raises at B; each negative case (a receiver taking ``**kwargs``, a test's ``MagicMock``, a keyword
call across a reorder, ``create=True``) runs at both and must get no ``breaks``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from balance_dev.package_index import wheel_name, wheel_of
from balance_dev.project_files import REPO_ROOT
from generator.cli import main

SCHEMA = json.loads((REPO_ROOT / "generator/judge/couplings/impact.schema.json").read_text())

A = {
    "vllm/__init__.py": "__version__ = '3.0.0'\n",
    "vllm/kv.py": """
        def make_coordinator(config, max_len, use_eagle=False):
            return ("coordinator", config, max_len)

        def make_pool(config, size=1):
            return ("pool", config, size)

        class Manager:
            def __init__(self, config):
                self.coordinator = make_coordinator(config=config, max_len=8)


        class PoolManager:
            def __init__(self, config):
                self.pool = make_pool(config, size=2)
    """,
    "vllm/backend.py": """
        class Backend:
            @staticmethod
            def sizes():
                return [1]

        class Runner:
            def run(self, a, b):
                return a + b

            def go(self):
                return self.run(a=1, b=2)

        def pick(backend):
            return backend.sizes()
    """,
    "vllm/config.py": """
        class SpecConfig:
            @staticmethod
            def override(hf):
                return hf

            def build(self, hf):
                return SpecConfig.override(hf)
    """,
    "vllm/spec.py": """
        from dataclasses import dataclass


        @dataclass
        class Spec:
            block: int
            storage: int = 0
    """,
    "vllm/state.py": """
        class State:
            def __init__(self):
                self.max_len = 0
    """,
    "vllm/sched.py": """
        class Sched:
            def __init__(self):
                self.queue = []

            def step(self):
                return len(self.queue)

            def size(self):
                return len(self.queue)
    """,
    "vllm/coord.py": """
        class Coord:
            def __init__(self, n):
                self.n = n

            def hit(self):
                return self.n
    """,
    "vllm/dp.py": """
        import json as codec

        def sync(x):
            return codec.dumps(x)
    """,
    "vllm/platform.py": """
        class Platform:
            @classmethod
            def find(cls):
                return 1
    """,
    "vllm/util.py": """
        def count(n, has_prefill):
            return n

        def gone_fn():
            return None
    """,
    "vllm/loop.py": """
        class Loop:
            def step(self, x):
                return x

            def run(self, x):
                return self.step(x)
    """,
    "vllm/members.py": """
        from dataclasses import dataclass


        class Manager:
            def __init__(self):
                self.blocks = []

            def common_prefix(self):
                return 0


        @dataclass
        class Cache:
            size: int
            storage: int = 0
    """,
}

B = {
    "vllm/__init__.py": "__version__ = '3.1.0'\n",
    "vllm/kv.py": """
        def make_coordinator(config, max_len, use_eagle=False, lookahead=0):
            return ("coordinator", config, max_len, lookahead)

        def make_pool(config, size=1, budget=None):
            return ("pool", config, size, budget)

        class Manager:
            def __init__(self, config):
                self.coordinator = make_coordinator(config=config, max_len=8, lookahead=2)


        class PoolManager:
            def __init__(self, config):
                self.pool = make_pool(config, size=2, budget=4)
    """,
    "vllm/backend.py": """
        class Backend:
            @staticmethod
            def sizes(spec=None):
                return [1]

        class Runner:
            def run(self, b, a, c=None):
                return a + b

            def go(self):
                return self.run(b=2, a=1)

        def pick(backend, spec=None):
            return backend.sizes(spec)
    """,
    "vllm/config.py": """
        class SpecConfig:
            @staticmethod
            def override(hf, extra=None):
                return hf

            def build(self, hf):
                return SpecConfig.override(hf, {"k": 1})
    """,
    "vllm/spec.py": """
        from dataclasses import dataclass


        @dataclass
        class Spec:
            block: int
    """,
    "vllm/state.py": """
        class State:
            def __init__(self):
                self.n = 0

            @property
            def max_len(self):
                return self.n
    """,
    "vllm/sched.py": """
        class Sched:
            def __init__(self):
                self.queue = []
                self.deferred = []

            def step(self):
                return len(self.queue) + len(self.deferred)

            def size(self):
                return len(self.queue)
    """,
    "vllm/coord.py": """
        class Coord:
            def __init__(self, n):
                self.n = n
                self.drop = set()

            def hit(self):
                return self.n - len(self.drop)
    """,
    "vllm/dp.py": """
        def sync(x):
            return str(x)
    """,
    "vllm/platform.py": """
        class Platform:
            pass
    """,
    "vllm/util.py": """
        def count(n, eligible):
            return n
    """,
    "vllm/loop.py": """
        class Loop:
            def step(self, x, budget=0):
                return x

            def run(self, x):
                return self.step(x, budget=1)
    """,
    "vllm/members.py": """
        from dataclasses import dataclass


        class Manager:
            def __init__(self):
                self.blocks = []


        @dataclass
        class Cache:
            size: int
    """,
}

TREE = {
    "pkg/__init__.py": "",
    "pkg/utils.py": """
        def vllm_version_is(target):
            import vllm

            return vllm.__version__ == target
    """,
    "pkg/patch_kv.py": """
        import vllm.kv as kv


        def make_coordinator(config, max_len, use_eagle=False):
            return ("mine", config, max_len)


        def make_pool(config, **kwargs):
            return ("mine", config)


        kv.make_coordinator = make_coordinator
        kv.make_pool = make_pool
    """,
    "pkg/backends.py": """
        from vllm.backend import Backend, Runner


        class MyBackend(Backend):
            @staticmethod
            def sizes():
                return [2]


        class AnyBackend(Backend):
            @staticmethod
            def sizes(*args):
                return [3]


        class MyRunner(Runner):
            def run(self, a, b, c=None):
                return a * b
    """,
    "pkg/patch_config.py": """
        from vllm.config import SpecConfig


        def normalize(hf):
            return hf


        SpecConfig.override = staticmethod(normalize)
    """,
    "pkg/spec.py": """
        from dataclasses import dataclass

        from vllm.spec import Spec


        @dataclass
        class MySpec(Spec):
            extra: int = 1
    """,
    "pkg/use_spec.py": """
        from pkg.spec import MySpec


        def make():
            return MySpec(block=1, storage=2)
    """,
    "pkg/state.py": """
        from vllm.state import State


        class MyState(State):
            pass
    """,
    "pkg/sched.py": """
        from vllm.sched import Sched


        class MySched(Sched):
            pass


        class OkSched(Sched):
            pass
    """,
    "pkg/coord.py": """
        from vllm.coord import Coord


        class MyCoord(Coord):
            def __init__(self, n):
                self.n = n
    """,
    "pkg/platform.py": """
        from vllm.platform import Platform


        class MyPlatform(Platform):
            pass
    """,
    "pkg/counts.py": """
        from vllm.util import count


        def counted():
            return count(1, True)
    """,
    "pkg/gated.py": """
        from pkg.utils import vllm_version_is

        if vllm_version_is("3.0.0"):
            from vllm.util import gone_fn
        else:
            gone_fn = None
    """,
    "pkg/ungated.py": """
        from vllm.util import gone_fn
    """,
    "pkg/loops.py": """
        from vllm.loop import Loop


        class OwnLoop(Loop):  # replaces run: B's run, which passes budget, never runs for it
            def step(self, x):
                return x

            def run(self, x):
                return self.step(x)


        class SuperLoop(Loop):  # runs B's run
            def step(self, x):
                return x

            def run(self, x):
                return super().run(x)
    """,
    "pkg/cache.py": """
        from dataclasses import dataclass

        from vllm.members import Cache


        @dataclass
        class MyCache(Cache):
            def total(self):
                return self.size + self.storage
    """,
    "tests/test_members.py": """
        from vllm.members import Manager


        def test_prefix():
            manager = Manager()
            assert manager.common_prefix() == 0
    """,
    "tests/test_state.py": """
        from pkg.state import MyState


        def test_set():
            s = MyState.__new__(MyState)
            s.max_len = 3
    """,
    "tests/test_sched.py": """
        from pkg.sched import MySched, OkSched


        def test_step():
            s = MySched.__new__(MySched)
            s.queue = [1]
            s.step()


        def test_size():
            s = OkSched.__new__(OkSched)
            s.queue = [1]
            s.size()
    """,
    "tests/test_mocks.py": """
        from unittest import mock

        from pkg.platform import MyPlatform


        def test_dist():
            with mock.patch("vllm.dp.codec.dumps"):
                pass


        def test_created():
            with mock.patch("vllm.dp.codec", create=True):
                pass


        def test_inherited():
            with mock.patch.object(MyPlatform, "find"):
                pass


        def test_mocked_coordinator():
            with mock.patch("vllm.kv.make_coordinator"):
                import vllm.kv as kv

                kv.Manager("c")
    """,
}

# (kind, file, upstream) -> (verdict, rule), and the statement whose run at A and at B is Python's word on it.
CASES: dict[tuple[str, str, str], tuple[tuple[str, str], str]] = {
    ("patch", "pkg/patch_kv.py", "vllm.kv.make_coordinator"): (
        ("breaks", "refuses-b-call"),
        "import pkg.patch_kv, vllm.kv as kv; kv.Manager('c')",
    ),
    # the replacement takes **kwargs: B's new keyword binds (its body drops it: review, not breaks)
    ("patch", "pkg/patch_kv.py", "vllm.kv.make_pool"): (
        ("review", "patched-changed"),
        "import pkg.patch_kv, vllm.kv as kv; kv.PoolManager('c')",
    ),
    ("patch", "pkg/patch_config.py", "vllm.config.SpecConfig.override"): (
        ("breaks", "refuses-b-call"),
        "import pkg.patch_config; from vllm.config import SpecConfig; SpecConfig().build({})",
    ),
    ("import", "pkg/spec.py", "vllm.spec.Spec"): (
        ("breaks", "call-refused"),
        "from pkg.use_spec import make; make()",
    ),
    ("import", "pkg/state.py", "vllm.state.State"): (
        ("breaks", "property-assigned"),
        "from tests.test_state import test_set; test_set()",
    ),
    ("import", "pkg/coord.py", "vllm.coord.Coord"): (
        ("breaks", "attribute-unset"),
        "from pkg.coord import MyCoord; MyCoord(1).hit()",
    ),
    ("import", "pkg/platform.py", "vllm.platform.Platform"): (
        ("info", "other"),
        "from pkg.platform import MyPlatform",
    ),
    ("patch", "tests/test_mocks.py", "vllm.dp.codec.dumps"): (
        ("breaks", "patch-target-gone"),
        "from tests.test_mocks import test_dist; test_dist()",
    ),
    ("patch", "tests/test_mocks.py", "vllm.dp.codec"): (
        ("info", "unresolved"),
        "from tests.test_mocks import test_created; test_created()",
    ),
    ("patch", "tests/test_mocks.py", "vllm.platform.Platform.find"): (
        ("breaks", "gone"),
        "from tests.test_mocks import test_inherited; test_inherited()",
    ),
    # a test's MagicMock in the function's place takes B's new keyword
    ("patch", "tests/test_mocks.py", "vllm.kv.make_coordinator"): (
        ("review", "patched-changed"),
        "from tests.test_mocks import test_mocked_coordinator; test_mocked_coordinator()",
    ),
    # binds at both, to a parameter of another name at B
    ("import", "pkg/counts.py", "vllm.util.count"): (
        ("review", "positional-renamed"),
        "from pkg.counts import counted; counted()",
    ),
    ("import", "pkg/gated.py", "vllm.util.gone_fn"): (("info", "gated"), "import pkg.gated"),
    # what the tree reads on its class's self, or calls on a vLLM object it built, that B's class dropped
    ("import", "pkg/cache.py", "vllm.members.Cache"): (
        ("breaks", "member-gone"),
        "from pkg.cache import MyCache; MyCache(size=1).total()",
    ),
    ("import", "tests/test_members.py", "vllm.members.Manager"): (
        ("breaks", "member-gone"),
        "from tests.test_members import test_prefix; test_prefix()",
    ),
    ("import", "pkg/ungated.py", "vllm.util.gone_fn"): (("breaks", "gone"), "import pkg.ungated"),
}
# Overrides, by the tree's method: (verdict, rule) and the statement.
_PICK = "import vllm.backend as b; from pkg.backends import {0}; b.pick({0})"
OVERRIDES = {
    "MyBackend.sizes": (("breaks", "refuses-b-call"), _PICK.format("MyBackend")),
    "AnyBackend.sizes": (("review", "patched-changed"), _PICK.format("AnyBackend")),
    # B reorders run's parameters and calls it by keyword: the tree's run takes that call
    "MyRunner.run": (("review", "patched-changed"), "from pkg.backends import MyRunner; MyRunner().go()"),
    # B's call of step is in its run, which OwnLoop replaces and SuperLoop runs
    "OwnLoop.step": (("review", "patched-changed"), "from pkg.loops import OwnLoop; OwnLoop().run(1)"),
    "SuperLoop.step": (("breaks", "refuses-b-call"), "from pkg.loops import SuperLoop; SuperLoop().run(1)"),
}
# Tests that build objects bare (their import of the vLLM class is judged in pkg/sched.py: the first use).
BARE = {
    "from tests.test_sched import test_step; test_step()": False,  # B's step reads self.deferred
    "from tests.test_sched import test_size; test_size()": True,  # B's size reads what A's did
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def _runs(release: Path, tree: Path, statement: str) -> bool:
    env = {"PYTHONPATH": f"{tree}:{release}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", statement], env=env, cwd=tree, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 or "Error" in done.stderr, done.stderr
    return done.returncode == 0


@pytest.fixture
def judged(tmp_path: Path, local_index: dict[str, bytes]) -> dict[str, Any]:
    for version, files in (("3.0.0", A), ("3.1.0", B)):
        root = _write(tmp_path / f"vllm-{version}", files)
        local_index[wheel_name(version)] = wheel_of(version, {rel: (root / rel).read_bytes() for rel in files})
    tree = _write(tmp_path / "plugin", TREE)
    (tree / "tests" / "__init__.py").write_text("")
    args = ["impact", "--root", str(tree), "--from", "v3.0.0", "--to", "v3.1.0", "--format", "json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    jsonschema.validate(found, SCHEMA)
    found["tree"], found["releases"] = str(tree), (str(tmp_path / "vllm-3.0.0"), str(tmp_path / "vllm-3.1.0"))
    return found


def _truth(judged: dict[str, Any], statement: str) -> tuple[bool, bool]:
    tree = Path(judged["tree"])
    at_a, at_b = (Path(r) for r in judged["releases"])
    return _runs(at_a, tree, statement), _runs(at_b, tree, statement)


def test_each_rule_of_b_side_agrees_with_python(judged: dict[str, Any]) -> None:
    found: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for c in judged["couplings"]:
        found.setdefault((c["kind"], c["site"].rpartition(":")[0], c["upstream"]), []).append(c)
    for key, (expected, statement) in CASES.items():
        assert key in found, key
        (coupling,) = found[key]
        assert (coupling["verdict"], coupling["rule"]) == expected, (key, coupling)
        at_a, at_b = _truth(judged, statement)
        assert at_a, (key, "the tree must work at A")
        assert (expected[0] == "breaks") == (not at_b), (key, at_b)
    by_method = {c["detail"].removesuffix(" overrides it"): c for c in judged["couplings"] if c["kind"] == "override"}
    for method, (expected, statement) in OVERRIDES.items():
        coupling = by_method[method]
        assert (coupling["verdict"], coupling["rule"]) == expected, coupling
        at_a, at_b = _truth(judged, statement)
        assert at_a and (expected[0] == "breaks") == (not at_b), (method, at_b)


def test_a_bare_object_breaks_where_b_reads_what_it_never_got(judged: dict[str, Any]) -> None:
    (sched,) = [c for c in judged["couplings"] if c["site"].startswith("pkg/sched.py") and c["kind"] == "import"]
    assert (sched["verdict"], sched["rule"]) == ("breaks", "attribute-unset")
    assert sched["at_path"] == "tests/test_sched.py" and "self.deferred" in sched["why"] and "test_step" not in sched
    lines = (Path(judged["tree"]) / "tests/test_sched.py").read_text().splitlines()
    assert "MySched.__new__" in lines[sched["at_line"] - 1]  # the test that only calls size() is not named
    for statement, survives in BARE.items():
        at_a, at_b = _truth(judged, statement)
        assert at_a and at_b == survives, statement


def test_the_rule_points_at_the_tree_function_b_calls(judged: dict[str, Any]) -> None:
    """``refuses-b-call`` names B's call site and the parameter, and points at the tree's function: its def line,
    its last line and its qualified name, as a TypeError names it (read here from the tree's text)."""
    tree = Path(judged["tree"])
    pointed = [c for c in judged["couplings"] if c["rule"] == "refuses-b-call"]
    assert {c["receiver"] for c in pointed} == {"make_coordinator", "normalize", "MyBackend.sizes", "SuperLoop.step"}
    for c in pointed:
        path = c.get("at_path") or c["site"].rpartition(":")[0]
        lines = (tree / path).read_text().splitlines()
        name = c["receiver"].rpartition(".")[2]
        assert lines[c["at_line"] - 1].lstrip().startswith(f"def {name}("), c
        assert c["at_end"] > c["at_line"] and "vllm/" in c["why"] and "v3.1.0" in c["why"], c
    (coordinator,) = [c for c in pointed if c["receiver"] == "make_coordinator"]
    assert "vllm/kv.py:" in coordinator["why"] and "lookahead" in coordinator["why"]

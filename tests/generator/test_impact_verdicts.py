"""Each verdict rule of ``impact`` on a small vLLM-shaped tree, between two small releases written here.

The truth is this file's: it planted every change in release B and every use in the tree, and says
(``EXPECTED``) what each must come to, with the rule, by reading what it wrote. Whether a call binds
is held to Python itself: ``inspect.Signature.bind`` on real functions, never the code under test.
"""

from __future__ import annotations

import ast
import inspect
import itertools
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
from generator.judge.couplings import impact, report, signatures, verdicts
from generator.pins import plan
from generator.sources import package

SCHEMA = json.loads((REPO_ROOT / "generator/judge/couplings/impact.schema.json").read_text())
PLAN_SCHEMA = json.loads((REPO_ROOT / "generator/pins/plan.schema.json").read_text())
DOC = REPO_ROOT / "docs/impact.md"

_COMPUTE = """
def compute(items):
    total = 0
    seen = set()
    for item in items:
        seen.add(item)
        total += item
    average = total / max(len(seen), 1)
    return average
"""
_TALLY = """
def tally(rows):
    count = 0
    for row in rows:
        if row.ok:
            count += 1
    rate = count / len(rows)
    final = round(rate, 2)
    return final
"""

# Classes the tree subclasses, changed under it in ways its own code never names (B's side below).
_SHAPES_A = """
import abc
from dataclasses import dataclass
from typing import NamedTuple


class Wrapper(abc.ABC):
    @abc.abstractmethod
    def apply(self, x): ...


class Complete(abc.ABC):
    @abc.abstractmethod
    def apply(self, x): ...


class Speculator:
    def __init__(self, n):
        self.n = n


class Settable:
    def __init__(self, n):
        self.n = n


@dataclass
class State:
    req_id: str
    tokens: int = 0


class Checked:
    pass

class Auto:
    def draft(self, x):
        return x


class Mtp(Auto):
    def draft(self, x):
        return x + 1


@dataclass
class Meta:
    seq_lens: list
    cpu_lens: list = None


class Group(NamedTuple):
    name: str
"""
_SHAPES_B = """
import abc
from dataclasses import dataclass
from typing import NamedTuple


class Wrapper(abc.ABC):
    @abc.abstractmethod
    def apply(self, x): ...

    @abc.abstractmethod
    def apply_full(self, x): ...


class Complete(abc.ABC):
    @abc.abstractmethod
    def apply(self, x): ...

    @abc.abstractmethod
    def extra(self): ...


class Speculator:
    def __init__(self, n):
        self.n = n

    @property
    def max_len(self):
        return self.n * 2


class Settable:
    def __init__(self, n):
        self.n = n

    @property
    def size(self):
        return self._size

    @size.setter
    def size(self, value):
        self._size = value


@dataclass
class State:
    req_id: str
    draft: list
    tokens: int = 0


class Checked:
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.checked = True


class Auto:
    def draft(self, x):
        return x


class Mtp(Auto):
    def draft(self, x, budget):
        return x + 1


@dataclass
class Meta:
    seq_lens: list
    max_len: int = 0


class Group(NamedTuple):
    name: str
    group_id: int
"""

A = {
    "vllm/__init__.py": "",
    "vllm/lib.py": textwrap.dedent("""
        def added_required(a):
            return a

        def added_default(a):
            return a

        def removed_param(a, b):
            return a

        def renamed(a, b):
            return a

        def kwonly(a, b):
            return a

        def body_changed(a):
            return a

        def gone():
            return None
    """)
    + _COMPUTE
    + _TALLY,
    "vllm/base.py": """
        class Base:
            def __init__(self, x):
                self.x = x

            def step(self, batch):
                return batch

            def plan(self, batch):
                return batch

            def flush(self, batch):
                return batch

            def configure(self, a):
                return a

            def drop(self):
                return None

            def run(self, a):
                return a
    """,
    "vllm/old.py": """
        def helper(x):
            return x
    """,
    "vllm/shapes.py": _SHAPES_A,
    "vllm/moved_a.py": """
        def relocated(x):
            y = x + 1
            return y
    """,
}

B = {
    "vllm/__init__.py": "",
    "vllm/lib.py": textwrap.dedent("""
        def added_required(a, b):
            return a

        def added_default(a, b=1):
            return a

        def removed_param(a):
            return a

        def renamed(a, c):
            return a

        def kwonly(a, *, b):
            return a

        def body_changed(a):
            return a + 1
    """)
    + _TALLY.replace("    final = round(rate, 2)\n", "    final = round(rate, 3)\n"),
    "vllm/base.py": """
        class Base:
            def __init__(self, x):
                self.x = x
                self.y = 1

            def step(self, batch, budget):
                return batch

            def plan(self, batch, budget=None):
                return batch

            def flush(self, *, batch):
                return batch

            def configure(self, a, *, mode):
                return a

            def run(self, a):
                return a * 2
    """,
    "vllm/new.py": """
        def helper(x):
            return x
    """,
    "vllm/old.py": "from vllm.new import helper\n",
    "vllm/shapes.py": _SHAPES_B,
    "vllm/moved_b.py": """
        def relocated(x):
            y = x + 1
            return y
    """,
}

TREE = {
    "pkg/__init__.py": "",
    "pkg/calls.py": """
        from vllm.lib import added_required, added_default, removed_param, renamed, kwonly, body_changed

        added_required(1)
        added_default(1)
        removed_param(1, 2)
        renamed(1, b=2)
        kwonly(1, 2)
        body_changed(1)
    """,
    "pkg/calls_fixed.py": """
        from vllm.lib import renamed

        renamed(1, c=2)
    """,
    "pkg/over.py": """
        from vllm.base import Base


        class Mine(Base):
            def __init__(self, x):
                super().__init__(x)

            def step(self, batch):
                return batch

            def plan(self, batch):
                return batch

            def flush(self, batch):
                return super().flush(batch)

            def drop(self):
                return None

            def run(self, a):
                return a


        class Robust(Base):
            def step(self, *args, **kwargs):
                return super().step(*args, **kwargs)

            def configure(self, a, **kwargs):
                return super().configure(a, **kwargs)


        class Strict(Base):
            def configure(self, a):
                return super().configure(a)
    """,
    "pkg/patches.py": """
        import vllm.lib as lib
        import vllm.old as old

        lib.gone = None
        lib.added_required = lambda a: a
        lib.added_default = lambda a: a
        lib.body_changed = lambda a: a
        old.helper = lambda x: x
    """,
    "pkg/sub.py": """
        from dataclasses import dataclass

        from vllm.shapes import Checked, Speculator, State, Wrapper


        class NpuWrapper(Wrapper):
            def apply(self, x):
                return x


        class NpuSpeculator(Speculator):
            def __init__(self, n):
                super().__init__(n)
                self.max_len = 5


        @dataclass
        class NpuState(State):
            device: str = "npu"


        class NpuChecked(Checked):
            pass
    """,
    "pkg/generated.py": """
        from vllm.shapes import Group, Meta


        def make():
            return Meta(seq_lens=[1], cpu_lens=[2]), Group("a")
    """,
    "pkg/sub_base.py": """
        from vllm.shapes import Auto, Complete, Settable


        class Half(Complete):
            pass


        class TreeAuto(Auto):
            pass
    """,
    "pkg/sub_ok.py": """
        from pkg.sub_base import Half, TreeAuto
        from vllm.shapes import Mtp, Settable


        class Leaf(TreeAuto, Mtp):
            def draft(self, x):
                return x


        class Full(Half):
            def apply(self, x):
                return x

            def extra(self):
                return None


        class Sized(Settable):
            def __init__(self, n):
                super().__init__(n)
                self.size = n
    """,
    "pkg/imports.py": """
        from vllm.old import helper
        from vllm.moved_a import relocated
    """,
    "tests/test_lib.py": """
        from unittest import mock

        def test_it():
            with mock.patch("vllm.lib.added_required"), mock.patch("vllm.lib.gone"):
                pass
    """,
    "tests/test_sub.py": """
        from pkg.sub import NpuWrapper
        from vllm.shapes import Wrapper

        def test_it():
            assert issubclass(NpuWrapper, Wrapper)
    """,
    "tests/test_binds.py": """
        from unittest import mock

        def test_it():
            # the tree's own name (pkg.imports binds relocated); vLLM's module through the tree's name
            with mock.patch("pkg.imports.relocated"), mock.patch("pkg.patches.lib.gone"):
                pass
    """,
    "pkg/copies.py": _COMPUTE.replace("    total = 0\n", "    total = 0.0\n")
    + _TALLY.replace("    count = 0\n", "    count = -1\n"),
}

# (kind, file, upstream) -> (verdict, rule): what this file planted, read here.
EXPECTED = {
    ("import", "pkg/calls.py", "vllm.lib.added_required"): ("breaks", "call-refused"),  # b has no default
    ("import", "pkg/calls.py", "vllm.lib.added_default"): ("info", "other"),  # b=1: the call still binds
    ("import", "pkg/calls.py", "vllm.lib.removed_param"): ("breaks", "call-refused"),  # 2 positional, 1 slot
    ("import", "pkg/calls.py", "vllm.lib.renamed"): ("breaks", "call-refused"),  # no keyword b
    ("import", "pkg/calls.py", "vllm.lib.kwonly"): ("breaks", "call-refused"),  # b is keyword-only
    ("import", "pkg/calls.py", "vllm.lib.body_changed"): ("info", "other"),  # the call binds; body is upstream's
    ("import", "pkg/calls_fixed.py", "vllm.lib.renamed"): ("info", "other"),  # refused at A, binds at B
    ("import", "pkg/over.py", "vllm.base.Base"): ("review", "init-changed"),
    # What B's class does to the tree's class below it, which the tree never writes (test_inherited_truth).
    ("import", "pkg/sub.py", "vllm.shapes.Wrapper"): ("breaks", "abstract-added"),  # no apply_full
    # The same class imported where no class is built on it: what breaks is NpuWrapper, judged in pkg/sub.py.
    ("import", "tests/test_sub.py", "vllm.shapes.Wrapper"): ("info", "other"),
    ("import", "pkg/sub.py", "vllm.shapes.Speculator"): ("breaks", "property-assigned"),  # self.max_len = 5
    ("import", "pkg/sub.py", "vllm.shapes.State"): ("review", "init-changed"),  # a field without default
    ("import", "pkg/sub.py", "vllm.shapes.Checked"): ("review", "init-changed"),  # __init_subclass__ runs
    # Calls of classes whose __init__ (__new__) their fields generate: cpu_lens is gone, group_id required.
    ("import", "pkg/generated.py", "vllm.shapes.Meta"): ("breaks", "call-refused"),
    ("import", "pkg/generated.py", "vllm.shapes.Group"): ("breaks", "call-refused"),
    # Half leaves extra to Full, the class below it in another file: Full is what gets instantiated.
    ("import", "pkg/sub_base.py", "vllm.shapes.Complete"): ("info", "other"),
    ("import", "pkg/sub_ok.py", "vllm.shapes.Settable"): ("info", "other"),  # the property has a setter
    ("patch", "pkg/patches.py", "vllm.lib.gone"): ("breaks", "gone"),
    ("patch", "pkg/patches.py", "vllm.lib.added_required"): ("breaks", "patch-signature"),
    ("patch", "pkg/patches.py", "vllm.lib.added_default"): ("review", "patched-changed"),
    ("patch", "pkg/patches.py", "vllm.lib.body_changed"): ("review", "patched-changed"),
    ("patch", "pkg/patches.py", "vllm.old.helper"): ("breaks", "patch-lands-elsewhere"),
    ("import", "pkg/patches.py", "vllm.lib"): ("info", "other"),
    ("import", "pkg/patches.py", "vllm.old"): ("info", "other"),
    ("import", "pkg/imports.py", "vllm.old.helper"): ("info", "moved-reexported"),
    ("import", "pkg/imports.py", "vllm.moved_a.relocated"): ("breaks", "gone"),  # no re-export at B
    ("copy", "pkg/copies.py", "vllm.lib.compute"): ("breaks", "copy-of-removed"),
    # A test's mock.patch puts a MagicMock in place, which takes any call; of a name gone it raises.
    ("patch", "tests/test_lib.py", "vllm.lib.added_required"): ("review", "patched-changed"),
    ("patch", "tests/test_lib.py", "vllm.lib.gone"): ("breaks", "gone"),
    ("copy", "pkg/copies.py", "vllm.lib.tally"): ("review", "copy-changed"),
    # A mock of the tree's own name: the import in pkg/imports.py is what breaks. Through the tree's name
    # of vLLM's module, the patch reaches vLLM's own name, which is gone.
    ("patch", "tests/test_binds.py", "vllm.moved_a.relocated"): ("info", "own-binding"),
    ("patch", "tests/test_binds.py", "vllm.lib.gone"): ("breaks", "gone"),
}
# Overrides, by class and method (several classes override one base method): **kwargs passed through
# takes B's new keyword mode, a plain signature does not.
OVERRIDES = {
    "Mine.__init__": ("review", "patched-changed"),
    "Mine.step": ("breaks", "override-signature"),  # no budget
    "Mine.plan": ("review", "patched-changed"),  # budget=None
    "Mine.flush": ("breaks", "super-call"),  # batch is keyword-only
    "Mine.drop": ("breaks", "override-gone"),
    "Mine.run": ("review", "patched-changed"),
    "Robust.step": ("review", "patched-changed"),
    "Robust.configure": ("review", "patched-changed"),
    "Strict.configure": ("breaks", "override-signature"),
    # Through a class of the tree in another file; of two vLLM bases defining draft, Python's method
    # resolution reaches Mtp's before Auto's (Mtp derives from Auto): Mtp.draft gained a parameter.
    "Full.extra": ("review", "override-added"),
    "Leaf.draft": ("breaks", "override-signature"),
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip("\n"))
    return root


@pytest.fixture
def report_json(tmp_path: Path, local_index: dict[str, bytes]) -> dict[str, Any]:
    for version, files in (("1.0.0", A), ("1.1.0", B)):
        root = _write(tmp_path / f"vllm-{version}", files)
        local_index[wheel_name(version)] = wheel_of(version, {rel: (root / rel).read_bytes() for rel in files})
    tree = _write(tmp_path / "plugin", TREE)
    args = ["impact", "--root", str(tree), "--from", "v1.0.0", "--to", "v1.1.0", "--format", "json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    jsonschema.validate(found, SCHEMA)
    found["tree"] = str(tree)
    return found


def test_each_rule_gives_the_verdict_the_planted_change_calls_for(report_json: dict[str, Any]) -> None:
    found: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for c in report_json["couplings"]:
        found.setdefault((c["kind"], c["site"].rpartition(":")[0], c["upstream"]), []).append(c)
    for key, expected in EXPECTED.items():
        assert key in found, key
        (coupling,) = found[key]
        assert (coupling["verdict"], coupling["rule"]) == expected, (key, coupling)
        assert coupling["why"], key
    by_class = {
        c["detail"].removesuffix(" overrides it"): c for c in report_json["couplings"] if c["kind"] == "override"
    }
    for method, expected in OVERRIDES.items():
        assert (by_class[method]["verdict"], by_class[method]["rule"]) == expected, by_class[method]
    # Every rule is exercised here but the catch-alls this tree has no case of, and what B's own code does to
    # a tree (test_impact_b_side.py).
    used = {c["rule"] for c in report_json["couplings"]}
    b_side = {"refuses-b-call", "attribute-unset", "patch-target-gone", "positional-renamed", "gated", "member-gone"}
    assert {r.name for r in verdicts.RULES} - used <= {"override-added", "redundant", "declared", "unresolved", *b_side}
    assert sum(report_json["verdicts"].values()) == len(report_json["couplings"])
    assert report_json["verdicts"] == {
        v: sum(c["verdict"] == v for c in report_json["couplings"]) for v in ("breaks", "review", "info")
    }


def test_a_refused_call_and_a_super_call_carry_the_line_of_the_call(report_json: dict[str, Any]) -> None:
    """``at_line`` is where the refused call is in the file (this file's text, read here), not the import."""
    tree = Path(report_json["tree"])
    for c in report_json["couplings"]:
        if c["rule"] not in ("call-refused", "super-call"):
            assert "at_line" not in c, c
            continue
        path = c["site"].rpartition(":")[0]
        lines = (tree / path).read_text().splitlines()
        name = c["upstream"].rpartition(".")[2] if c["rule"] == "call-refused" else "super()."
        assert name in lines[c["at_line"] - 1] and c["at_line"] != int(c["site"].rpartition(":")[2]), c
        assert f"line {c['at_line']}" in c["why"], c


# Python's own word on the classes of pkg/sub*.py: each made as the plugin would (this file's literals), at
# each release. A breaks rule must be exactly where Python refuses at B what it took at A.
_MADE = {
    "vllm.shapes.Wrapper": "from pkg.sub import NpuWrapper; NpuWrapper()",
    "vllm.shapes.Speculator": "from pkg.sub import NpuSpeculator; NpuSpeculator(3)",
    "vllm.shapes.Complete": "from pkg.sub_ok import Full; Full()",
    "vllm.shapes.Settable": "from pkg.sub_ok import Sized; Sized(3)",
    "vllm.shapes.Meta": "from pkg.generated import make; make()",
}


def _python_takes(release: Path, tree: Path, statement: str) -> bool:
    env = {"PYTHONPATH": f"{tree}:{release}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", statement], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0 or "Error" in done.stderr, done.stderr
    return done.returncode == 0


def test_inherited_rules_agree_with_python(report_json: dict[str, Any], tmp_path: Path) -> None:
    tree = Path(report_json["tree"])
    verdict = {
        c["upstream"]: c["rule"] for c in report_json["couplings"] if c["site"].startswith(("pkg/sub", "pkg/generated"))
    }
    for upstream, statement in _MADE.items():
        at_a = _python_takes(tmp_path / "vllm-1.0.0", tree, statement)
        at_b = _python_takes(tmp_path / "vllm-1.1.0", tree, statement)
        assert at_a, (upstream, "the tree's class must work at A")
        breaks = verdict[upstream] in ("abstract-added", "property-assigned", "call-refused")
        assert breaks == (not at_b), (upstream, verdict[upstream], at_b)


def test_text_and_the_plan_lead_with_breaks_and_count_info(report_json: dict[str, Any], tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["impact", "--root", report_json["tree"], "--from", "v1.0.0", "--to", "v1.1.0"])
    assert result.exit_code == 0, result.stderr
    heads = [line for line in result.stdout.splitlines() if line.startswith(("breaks (", "review (", "info ("))]
    breaks = sum(c["verdict"] == "breaks" for c in report_json["couplings"])
    info = sum(c["verdict"] == "info" for c in report_json["couplings"])
    assert heads[0] == f"breaks ({breaks})" and heads[1].startswith("review (")
    assert heads[2] == f"info ({info}): counted; --all lists them"
    result = CliRunner().invoke(
        main, ["impact", "--root", report_json["tree"], "--from", "v1.0.0", "--to", "v1.1.0", "--format", "markdown"]
    )
    md = result.stdout
    assert md.index("#### breaks (") < md.index("#### review (") and "#### info" not in md
    assert "`vllm.lib.body_changed`" in md.split("#### review (")[1]  # the patch of it; its import is info
    result = CliRunner().invoke(
        main, ["impact", "--root", report_json["tree"], "--from", "v1.0.0", "--to", "v1.1.0", "--format", "github"]
    )
    levels = [line.split(" ", 1)[0] for line in result.stdout.splitlines() if line.startswith("::")]
    assert levels == sorted(levels)  # ::error (breaks) before ::warning (review)
    assert levels.count("::error") == breaks


def test_the_bump_plan_carries_breaks_then_review(report_json: dict[str, Any]) -> None:
    """The plan's impact and its pull request's section (as ``bump --plan`` writes them) lead with breaks."""
    found = impact.run(Path(report_json["tree"]), package.release("v1.0.0"), package.release("v1.1.0"))
    summary = report.summary_json(found)
    order = [s["verdict"] for s in summary["symbols"]]
    assert order == sorted(order, key=("breaks", "review").index) and "info" not in order
    assert summary["verdicts"] == report_json["verdicts"]
    broken = {s["name"] for s in summary["symbols"] if s["verdict"] == "breaks"}
    bases = {"Leaf": "vllm.shapes.Mtp"}  # the rest override vllm.base.Base
    overridden = {
        f"{bases.get(m.partition('.')[0], 'vllm.base.Base')}.{m.partition('.')[2]}"
        for m, v in OVERRIDES.items()
        if v[0] == "breaks"
    }
    assert broken == {k[2] for k, v in EXPECTED.items() if v[0] == "breaks"} | overridden
    assert all(s["sites"] and s["why"] for s in summary["symbols"])
    section = report.markdown(found, suite="(the plugin's unit tests at both releases)")
    made = plan.bumped(
        "v1.0.0", "v1.1.0", method_diff="", outcomes=[], no_copy_reason="none", rows=[], impact=summary,
        impact_markdown=section,
    )  # fmt: skip
    jsonschema.validate(made, PLAN_SCHEMA)
    body = made["pull_request"]["body"]
    breaks = report_json["verdicts"]["breaks"]
    assert body.index(f"**{breaks} break") < body.index("(the plugin's unit tests") < body.index("#### breaks (")
    assert body.index("#### breaks (") < body.index("#### review (")
    assert "+    return a + 1" in body  # upstream's diff of a definition to review, folded


def test_the_docs_list_every_rule() -> None:
    text = DOC.read_text()
    for rule in verdicts.RULES:
        assert f"| `{rule.name}` | `{rule.verdict}` |" in text, rule.name


# Signatures and calls to try: each binds, or not, as Python says.
_SIGNATURES = [
    "(a)",
    "(a, b)",
    "(a, b=1)",
    "(a, /, b)",
    "(a, *, b)",
    "(a, *, b=1)",
    "(*args)",
    "(a, **kwargs)",
    "(a, *args, **kwargs)",
    "(a, /, b=2, *, c)",
]
_CALLS = [((), ()), ((1,), ()), ((1, 2), ()), ((1,), ("b",)), ((), ("a", "b")), ((1, 2, 3), ()), ((1,), ("c",))]


@pytest.mark.parametrize("source", _SIGNATURES)
def test_a_call_binds_exactly_when_python_binds_it(source: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"def f{source}: pass", namespace)  # this file's own literals
    node = ast.parse(f"def f{source}: pass").body[0]
    assert isinstance(node, ast.FunctionDef)
    sig = signatures.of(node.args)
    truth = inspect.signature(namespace["f"])
    for (args, keywords), star in itertools.product(_CALLS, (False,)):
        call = signatures.Call(len(args), keywords, star)
        try:
            truth.bind(*args, **dict.fromkeys(keywords, 0))
            binds = True
        except TypeError:
            binds = False
        assert (signatures.refuses(call, sig) is None) == binds, (source, args, keywords)


# A package with a module ``__getattr__`` and a submodule at A that B no longer has as a file: an import
# statement imports the submodule itself (``from vllm.configs.sub import X``, ``import vllm.configs.sub``),
# which no ``__getattr__`` serves, so at B it raises ModuleNotFoundError; ``from vllm.configs import X`` and
# ``vllm.configs.sub.X`` as an attribute (a test's mock.patch) are the ``__getattr__``'s to serve.
_LAZY = """
    def __getattr__(name):
        import importlib

        return getattr(importlib.import_module(".impl", __name__), name)
"""
LAZY_A = {
    "vllm/__init__.py": "",
    "vllm/configs/__init__.py": _LAZY,
    "vllm/configs/impl.py": "class Lazy:\n    pass\n",
    "vllm/configs/sub.py": """
        class SubConfig:
            def __init__(self, depth):
                self.depth = depth

        def relocated(x):
            y = x + 1
            return y
    """,
    "vllm/configs/kept.py": "class KeptConfig:\n    pass\n",
}
LAZY_B = {
    "vllm/__init__.py": "",
    "vllm/configs/__init__.py": _LAZY,
    "vllm/configs/impl.py": "class Lazy:\n    pass\n",
    "vllm/configs/kept.py": "class KeptConfig:\n    pass\n",
    "vllm/elsewhere.py": """
        def relocated(x):
            y = x + 1
            return y
    """,
}
LAZY_TREE = {
    "pkg/__init__.py": "",
    "pkg/configs.py": """
        from vllm.configs.sub import SubConfig
        from vllm.configs.sub import relocated
        import vllm.configs.sub
        from vllm.configs import Lazy
        from vllm.configs.kept import KeptConfig
        from vllm.configs.never import Nothing
    """,
    "tests/test_configs.py": """
        from unittest import mock

        def test_it():
            with mock.patch("vllm.configs.sub.SubConfig"):
                pass
    """,
}
# (kind, file, upstream) -> (status, verdict, rule), read off what LAZY_A, LAZY_B and LAZY_TREE plant.
LAZY_EXPECTED = {
    ("import", "pkg/configs.py", "vllm.configs.sub.SubConfig"): ("removed", "breaks", "gone"),
    ("import", "pkg/configs.py", "vllm.configs.sub.relocated"): ("moved", "breaks", "gone"),  # elsewhere.py
    ("import", "pkg/configs.py", "vllm.configs.sub"): ("removed", "breaks", "gone"),
    ("import", "pkg/configs.py", "vllm.configs.Lazy"): ("unresolved", "info", "unresolved"),  # __getattr__'s
    ("import", "pkg/configs.py", "vllm.configs.kept.KeptConfig"): ("unchanged", "info", "other"),
    ("import", "pkg/configs.py", "vllm.configs.never.Nothing"): ("unresolved", "info", "unresolved"),  # A nor B
    ("patch", "tests/test_configs.py", "vllm.configs.sub.SubConfig"): ("unresolved", "info", "unresolved"),
}


def test_an_import_statement_needs_its_module_as_a_file(tmp_path: Path, local_index: dict[str, bytes]) -> None:
    for version, files in (("2.0.0", LAZY_A), ("2.1.0", LAZY_B)):
        root = _write(tmp_path / f"vllm-{version}", files)
        local_index[wheel_name(version)] = wheel_of(version, {rel: (root / rel).read_bytes() for rel in files})
    tree = _write(tmp_path / "plugin", LAZY_TREE)
    args = ["impact", "--root", str(tree), "--from", "v2.0.0", "--to", "v2.1.0", "--format", "json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)
    jsonschema.validate(found, SCHEMA)
    got = {(c["kind"], c["site"].rpartition(":")[0], c["upstream"]): c for c in found["couplings"]}
    for key, (status, verdict, rule) in LAZY_EXPECTED.items():
        assert key in got, key
        assert (got[key]["status"], got[key]["verdict"], got[key]["rule"]) == (status, verdict, rule), got[key]
    moved = got[("import", "pkg/configs.py", "vllm.configs.sub.relocated")]
    assert "vllm.elsewhere.relocated" in moved["why"]
    # The name's own record is the import statement's: gone at B, its module no file there.
    symbol = found["symbols"]["vllm.configs.sub.SubConfig"]
    assert symbol["status"] == "removed" and "no module vllm.configs.sub" in symbol["detail"]

"""The suite harness on a tiny vLLM-shaped package and a tiny plugin suite, run by pytest for real.

Two releases of a package named ``vllm`` (each under its own ``site-packages/``, as installed) and a
plugin tree that imports, overrides, patches and calls it; its tests run at A and then at B with the
suite's recording plugin. What each test does at B, and which coupling that is, is written down here
by hand (the couplings as ``impact --format json`` lists them): the answer is never the code's reading.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from balance_dev.suite import outcomes, results
from generator.judge.explain import attribute, scopes

SITE = Path(__file__).resolve().parents[2] / "balance_dev" / "suite" / "site"

VLLM_A = {
    "vllm/__init__.py": "",
    "vllm/a.py": "def gone():\n    return 1\n\n\ndef kept():\n    return 1\n",
    "vllm/b.py": textwrap.dedent(
        """\
        class Base:
            def step(self, x):
                return x

            def run(self, x):
                return self.step(x)
        """
    ),
    "vllm/c.py": "def helper(a):\n    return a\n\n\ndef check(v):\n    return v\n",
    "vllm/d.py": "VALUE = 1\n",
}
VLLM_B = {
    "vllm/__init__.py": "",
    "vllm/a.py": "def kept():\n    return 1\n",  # gone() is removed
    "vllm/b.py": textwrap.dedent(
        """\
        class Base:
            def step(self, x, y=0):
                return x + y

            def run(self, x):
                return self.step(x, y=1)
        """
    ),  # B calls step with a new keyword: the plugin's override refuses it
    # helper: a new required parameter; check: a body that now refuses what the plugin passes
    "vllm/c.py": "def helper(a, b):\n    return a + b\n\n\ndef check(v):\n    raise ValueError(v)\n",
    "vllm/d.py": "VALUE = 2\n",  # a value the plugin's test relies on
}
TREE = {
    "plugin/__init__.py": "",
    "plugin/gone_user.py": "from vllm.a import (\n    kept,\n    gone,\n)\n\n\ndef use():\n"
    "    return gone() + kept()\n",
    "plugin/sub.py": textwrap.dedent(
        """\
        from vllm.b import Base


        class Sub(Base):
            def step(self, x):
                return 2 * x
        """
    ),
    "plugin/caller.py": textwrap.dedent(
        """\
        from vllm.c import check, helper


        def call(v):
            return helper(v)


        def verify(v):
            return check(v)
        """
    ),
    "tests/__init__.py": "",
    "tests/test_gone.py": "from plugin.gone_user import use\n\n\ndef test_use():\n    assert use() == 2\n",
    "tests/test_rest.py": textwrap.dedent(
        """\
        from plugin.caller import call, verify
        from plugin.sub import Sub
        from vllm.d import VALUE
        from vllm.a import kept


        def test_override():
            assert Sub().run(3) == 6


        def test_call():
            assert call(1) == 1


        def test_verify():
            assert verify(1) == 1


        def test_value():
            assert VALUE == 1


        def test_fine():
            assert kept() == 1


        def test_theirs():
            assert kept() == 2
        """
    ),
}


# impact's couplings of TREE between VLLM_A and VLLM_B, written by hand (with verdicts as impact gives them)
def coupling(kind: str, site: str, upstream: str, status: str, verdict: str | None) -> dict[str, object]:
    return {"kind": kind, "site": site, "upstream": upstream, "status": status, "verdict": verdict}


COUPLINGS = [
    coupling("import", "plugin/gone_user.py:1", "vllm.a.gone", "removed", "breaks"),
    coupling("import", "plugin/gone_user.py:1", "vllm.a.kept", "changed", "info"),  # imported fine: not named
    coupling("import", "plugin/sub.py:1", "vllm.b.Base", "changed", "info"),
    coupling("override", "plugin/sub.py:5", "vllm.b.Base.step", "changed", "review"),
    coupling("import", "plugin/caller.py:1", "vllm.c.helper", "changed", "breaks"),
    coupling("import", "plugin/caller.py:1", "vllm.c.check", "changed", "review"),
    coupling("import", "tests/test_rest.py:3", "vllm.d.VALUE", "changed", "review"),
    coupling("import", "tests/test_rest.py:4", "vllm.a.kept", "unchanged", None),
]
SYMBOLS = {
    "vllm.b.Base.step": {"parts": ["signature", "body"], "to": {"path": "vllm/b.py", "lines": [2, 3]}},
    "vllm.b.Base": {"parts": ["members"], "to": {"path": "vllm/b.py", "lines": [1, 6]}},
    "vllm.c.helper": {"parts": ["signature", "body"], "to": {"path": "vllm/c.py", "lines": [1, 2]}},
    "vllm.c.check": {"parts": ["body"], "to": {"path": "vllm/c.py", "lines": [5, 6]}},
}
# The truth: each bump failure, the couplings it hit and by which rule.
EXPECTED = {
    "tests/test_gone.py::test_use": {("plugin/gone_user.py:1", "vllm.a.gone", "frame+name")},
    # B's Base.run calls the override with y=1: the TypeError names Sub.step; sub.py is in no frame (the call
    # fails before the override runs), so the import of Base there is not named
    "tests/test_rest.py::test_override": {("plugin/sub.py:5", "vllm.b.Base.step", "call")},
    "tests/test_rest.py::test_call": {("plugin/caller.py:1", "vllm.c.helper", "call")},
    # raised inside B's check, called from caller.py, which imports it
    "tests/test_rest.py::test_verify": {("plugin/caller.py:1", "vllm.c.check", "upstream")},
    "tests/test_rest.py::test_value": set(),  # an AssertionError on a value: no coupling explains it
}


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def run_at(tmp: Path, release: str, files: dict[str, str], tree: Path) -> outcomes.SuiteRun:
    site = tmp / release / "site-packages"
    write(site, files)
    records = tmp / f"{release}.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env |= {"PYTHONPATH": os.pathsep.join([str(SITE), str(site)]), "BALANCE_SUITE_RECORDS": str(records)}
    cmd = [sys.executable, "-m", "pytest", "-p", "balance_suite_pytest", "-p", "no:cacheprovider", "-q"]
    cmd += ["--continue-on-collection-errors", "-c", os.devnull, "--rootdir", str(tree), "tests"]
    subprocess.run(cmd, cwd=tree, env=env, capture_output=True, check=False)
    return outcomes.read_records(records)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, outcomes.SuiteRun, outcomes.SuiteRun]:
    tmp = tmp_path_factory.mktemp("suite")
    tree = tmp / "tree"
    write(tree, TREE)
    return tree, run_at(tmp, "A", VLLM_A, tree), run_at(tmp, "B", VLLM_B, tree)


def test_outcomes_at_both_releases(runs: tuple[Path, outcomes.SuiteRun, outcomes.SuiteRun]) -> None:
    _, at_from, at_to = runs
    assert {t: o.outcome for t, o in at_from.tests.items()} == {
        "tests/test_gone.py::test_use": "passed",
        "tests/test_rest.py::test_override": "passed",
        "tests/test_rest.py::test_call": "passed",
        "tests/test_rest.py::test_verify": "passed",
        "tests/test_rest.py::test_value": "passed",
        "tests/test_rest.py::test_fine": "passed",
        "tests/test_rest.py::test_theirs": "failed",
    }
    assert sorted(at_to.collect_errors) == ["tests/test_gone.py"]
    assert at_to.collect_errors["tests/test_gone.py"].error.startswith("ImportError: cannot import name 'gone'")
    assert at_to.counts()["errors"] == 1 and at_to.counts()["passed"] == 1 and at_to.counts()["failed"] == 5


def test_bump_failures_and_theirs(runs: tuple[Path, outcomes.SuiteRun, outcomes.SuiteRun]) -> None:
    _, at_from, at_to = runs
    assert [f.test for f in outcomes.bump_failures(at_from, at_to)] == sorted(EXPECTED)
    assert [o.test for o in outcomes.theirs(at_from)] == ["tests/test_rest.py::test_theirs"]


def test_each_failure_named(runs: tuple[Path, outcomes.SuiteRun, outcomes.SuiteRun]) -> None:
    tree, at_from, at_to = runs
    outlines = scopes.outlines(tree)
    site_scopes = {str(c["site"]): scopes.scope_of(outlines, str(c["kind"]), str(c["site"])) for c in COUPLINGS}
    couplings = attribute.couplings_of({"symbols": SYMBOLS}, site_scopes, COUPLINGS)
    named = attribute.attribute(outcomes.bump_failures(at_from, at_to), couplings)
    assert {a.test: {(h.site, h.upstream, h.rule) for h in a.hits} for a in named} == EXPECTED
    assert {a.test: a.verdict for a in named} == {
        "tests/test_gone.py::test_use": "breaks",
        "tests/test_rest.py::test_override": "review",
        "tests/test_rest.py::test_call": "breaks",
        "tests/test_rest.py::test_value": "nothing",
        "tests/test_rest.py::test_verify": "review",
    }


def test_no_verdict_yet_is_unjudged(runs: tuple[Path, outcomes.SuiteRun, outcomes.SuiteRun]) -> None:
    """impact without verdicts (before they land): the hits stand, the failure's class is ``unjudged``."""
    tree, at_from, at_to = runs
    bare = [{k: v for k, v in c.items() if k != "verdict"} for c in COUPLINGS]
    outlines = scopes.outlines(tree)
    site_scopes = {str(c["site"]): scopes.scope_of(outlines, str(c["kind"]), str(c["site"])) for c in bare}
    named = attribute.attribute(
        outcomes.bump_failures(at_from, at_to), attribute.couplings_of({"symbols": SYMBOLS}, site_scopes, bare)
    )
    assert [a.verdict for a in named] == ["unjudged", "unjudged", "unjudged", "nothing", "unjudged"]
    assert all(h.verdict is None for a in named for h in a.hits)


def test_executed_breaks_counted(runs: tuple[Path, outcomes.SuiteRun, outcomes.SuiteRun]) -> None:
    tree, at_from, at_to = runs
    outlines = scopes.outlines(tree)
    site_scopes = {str(c["site"]): scopes.scope_of(outlines, str(c["kind"]), str(c["site"])) for c in COUPLINGS}
    couplings = attribute.couplings_of({"symbols": SYMBOLS}, site_scopes, COUPLINGS)
    breaks = [c for c in couplings if c.verdict == "breaks"]
    ran = results.executed(breaks, {"plugin/caller.py": {1, 4, 5}})  # gone_user.py never ran, say
    named = attribute.attribute(outcomes.bump_failures(at_from, at_to), couplings)
    doc = results.document({"from": "vA", "to": "vB"}, at_from, at_to, named, outcomes.theirs(at_from), breaks, ran)
    assert doc["breaks_executed_at_from"] == 1 and doc["breaks_executed_failing_at_to"] == 1
    assert doc["by_verdict"] == {"breaks": 2, "review": 2, "info": 0, "unjudged": 0, "nothing": 1}
    assert doc["by_status"] == {"changed": 3, "removed": 1}  # test_value hit nothing


def test_executed_is_the_call_impact_names_and_an_override_s_body(
    runs: tuple[Path, outcomes.SuiteRun, outcomes.SuiteRun],
) -> None:
    """An import runs whether or not the refused call after it does; an override's ``def`` runs when its
    class is made, called or not. plugin/caller.py calls helper at line 5; Sub.step's body is line 6."""
    tree, _, _ = runs
    raw = [
        {**coupling("import", "plugin/caller.py:1", "vllm.c.helper", "changed", "breaks"), "at_line": 5},
        {**coupling("override", "plugin/sub.py:5", "vllm.b.Base.step", "changed", "breaks")},
    ]
    outlines = scopes.outlines(tree)
    site_scopes = {str(c["site"]): scopes.scope_of(outlines, str(c["kind"]), str(c["site"])) for c in raw}
    call, override = attribute.couplings_of({"symbols": SYMBOLS}, site_scopes, raw)
    imported_and_defined = {"plugin/caller.py": {1, 4}, "plugin/sub.py": {1, 4, 5}}
    assert results.executed([call, override], imported_and_defined) == []
    called = {"plugin/caller.py": {1, 4, 5}, "plugin/sub.py": {1, 4, 5, 6}}
    assert results.executed([call, override], called) == [call, override]


# A class of the tree (plugin/spec.py) subclassing vLLM's Spec and overriding one of its methods; at B the
# base gained a field the tree's caller passes, an abstract method, a property. Written by hand: the couplings
# as impact lists them, the scopes as scopes.py reads them, and the hits each error must get.
SPEC_RAW = [
    {"kind": "import", "site": "plugin/spec.py:1", "upstream": "vllm.spec.Spec", "status": "changed"},
    {"kind": "override", "site": "plugin/spec.py:5", "upstream": "vllm.spec.Spec.size", "status": "unchanged"},
    {"kind": "import", "site": "plugin/other.py:1", "upstream": "vllm.spec.Spec", "status": "changed"},
]
SPEC_SCOPES = {
    "plugin/spec.py:1": scopes.Scope("plugin/spec.py", ((1, 1),)),
    "plugin/spec.py:5": scopes.Scope("plugin/spec.py", ((5, 6),), "AscendSpec.size"),
    "plugin/other.py:1": scopes.Scope("plugin/other.py", ((1, 1),)),
}


@pytest.mark.parametrize(
    "error",
    [
        "TypeError: AscendSpec.__init__() got an unexpected keyword argument 'storage_block_size'",
        "TypeError: Can't instantiate abstract class AscendSpec with abstract method page_bytes",
        "AttributeError: property 'max_len' of 'AscendSpec' object has no setter",
    ],
)
def test_an_error_naming_a_tree_class_hits_its_changed_vllm_base(error: str) -> None:
    couplings = attribute.couplings_of({}, SPEC_SCOPES, SPEC_RAW)
    bases = attribute.class_bases(SPEC_SCOPES, SPEC_RAW)
    failure = outcomes.Outcome(
        "tests/test_spec.py::test_make", "failed", error, (outcomes.Frame("tests/test_spec.py", 3, "test_make"),)
    )
    hit = attribute.attribute_one(failure, couplings, bases)
    # the import of the base in the class's own file, not the same import elsewhere; the unchanged override
    # explains nothing itself
    assert [(h.site, h.upstream, h.rule) for h in hit.hits] == [("plugin/spec.py:1", "vllm.spec.Spec", "class")]
    other = outcomes.Outcome(failure.test, "failed", error.replace("AscendSpec", "Unrelated"), failure.frames)
    assert attribute.attribute_one(other, couplings, bases).hits == ()


def test_a_scope_read_from_the_cache_follows_the_file_as_it_is_now(tmp_path: Path) -> None:
    # The outline pack is keyed by each file's bytes: a second run reads the same scope without parsing, and a
    # file edited since is read again, never answered from the outline of its old text.
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    source = tree / "pkg" / "runner.py"
    source.write_text("class Runner:\n    def step(self):\n        return 1\n")
    first = scopes.outlines(tree)
    assert scopes.scope_of(first, "override", "pkg/runner.py:2") == scopes.Scope(
        "pkg/runner.py", ((2, 3),), "Runner.step", (3, 3)
    )
    first.save()
    again = scopes.outlines(tree)
    assert scopes.scope_of(again, "override", "pkg/runner.py:2").qualname == "Runner.step"
    assert not again.added  # answered from the pack
    edited_text = "import os\n\n\nclass Runner:\n    @staticmethod\n    def step():\n        x = 1\n        return x\n"
    source.write_text(edited_text)
    edited = scopes.outlines(tree)
    assert scopes.scope_of(edited, "override", "pkg/runner.py:5") == scopes.Scope(
        "pkg/runner.py", ((5, 8),), "Runner.step", (7, 8)
    )

"""Peeling, run for real on a tiny tree: at B their conftest stops on a module B lacks, then on a name B lacks,
and a test module on another; each blocker gets a stand-in, in order, and the suite runs past them. What
each test does at B, what each peel is and which coupling each failure hits are written here by hand."""

from __future__ import annotations

import sys
from pathlib import Path

from balance_dev.suite import outcomes, peel, results, run
from generator.judge.explain import attribute, scopes

SITE = Path(__file__).resolve().parents[2] / "balance_dev" / "suite" / "site"
PATCHES = """\
from vllm.configs.v4 import Config
from vllm.utils import Base, Kept, helper

ORIGINAL = Base.forward


class Mine(Base, Kept):  # a gone base beside an ABC B still has: the stand-in's metaclass must fit both
    def own(self):
        return 3


def make_config():
    return Config()


def plain():
    return helper()
"""
TREE = {
    "pytest.ini": "[pytest]\n",
    "plugin/__init__.py": "",
    "plugin/patches.py": PATCHES,
    "tests/__init__.py": "",
    "tests/ut/__init__.py": "",
    "tests/ut/conftest.py": "import plugin.patches  # noqa: F401\n",
    "tests/ut/test_a.py": (
        "from plugin import patches\n\n\n"
        "def test_plain():\n    assert patches.plain() == 1\n\n\n"
        "def test_config():\n    assert patches.make_config() is not None\n\n\n"
        "def test_mine():\n    assert patches.Mine().own() == 3\n"
    ),
    "tests/ut/sub/__init__.py": "",
    "tests/ut/sub/test_c.py": (
        "import pytest\nfrom vllm.utils import MODES\n\n\n"
        '@pytest.mark.parametrize("mode", MODES)\ndef test_mode(mode):\n    assert mode\n'
    ),
    "tests/ut/sub/test_b.py": (
        "from vllm.utils import gone_fn\n\n\n"
        "def test_untouched():\n    assert sum([1, 1]) == 2\n\n\n"
        "def test_gone():\n    assert gone_fn() == 2\n"
    ),
}
KEPT = "import abc\n\n\nclass Kept(abc.ABC):\n    pass\n\n\n"
UTILS_A = KEPT + (
    "class Base:\n    def forward(self):\n        return 1\n\n\n"
    "def helper():\n    return 1\n\n\ndef gone_fn():\n    return 2\n\n\nMODES = ('a', 'b')\n"
)
RELEASES = {
    "A": {
        "vllm/__init__.py": "",
        "vllm/configs/__init__.py": "",
        "vllm/configs/v4.py": "class Config:\n    pass\n",
        "vllm/utils.py": UTILS_A,
    },
    # B: the module vllm.configs.v4 is gone, and vllm.utils lost Base, gone_fn and MODES
    "B": {
        "vllm/__init__.py": "",
        "vllm/configs/__init__.py": "",
        "vllm/utils.py": KEPT + "def helper():\n    return 1\n",
    },
}
COUPLINGS = [
    {"kind": "import", "site": "plugin/patches.py:1", "upstream": "vllm.configs.v4.Config", "status": "removed"},
    {"kind": "import", "site": "plugin/patches.py:2", "upstream": "vllm.utils.Base", "status": "removed"},
    {"kind": "import", "site": "plugin/patches.py:2", "upstream": "vllm.utils.helper", "status": "unchanged"},
]
GONE = "GoneAtB: {} is not in vLLM B (peeled; imported at {}, used: {})"
TEST_B, TEST_C = "tests/ut/sub/test_b.py", "tests/ut/sub/test_c.py"


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def env_at(tmp: Path, release: str) -> dict[str, str]:
    write(tmp / release, RELEASES[release])
    return {"PYTHONPATH": f"{SITE}:{tmp / release}"}


def test_peeling_runs_past_each_blocker_in_order(tmp_path: Path) -> None:
    tree, work = tmp_path / "tree", tmp_path / "work"
    write(tree, TREE)
    work.mkdir()
    python, tests = Path(sys.executable), ["tests/ut"]
    at_from = run.run_suite("at-from", python, tree, work, tests, 60, extra_env=env_at(tmp_path, "A"))
    env_b = env_at(tmp_path, "B")
    at_to = run.run_suite("at-vB", python, tree, work, tests, 60, extra_env=env_b)
    assert at_from.count("passed") == 7 and not at_from.collect_errors
    assert not at_to.tests and list(at_to.collect_errors) == ["tests/ut/"]  # the unpeeled truth: a stop

    peeling, peeled = peel.run_peeled("at-vB", python, tree, work, tests, 60, at_to, extra_env=env_b)
    made = [(p.round, p.peel.path, p.where, p.error.split(" (")[0]) for p in peeling.peels]
    assert made == [
        (1, "vllm.configs.v4", "tests/ut/", "ModuleNotFoundError: No module named 'vllm.configs.v4'"),
        (2, "vllm.utils.Base", "tests/ut/", "ImportError: cannot import name 'Base' from 'vllm.utils'"),
        (3, "vllm.utils.gone_fn", TEST_B, "ImportError: cannot import name 'gone_fn' from 'vllm.utils'"),
        (3, "vllm.utils.MODES", TEST_C, "ImportError: cannot import name 'MODES' from 'vllm.utils'"),
    ]  # the test modules' blockers: one round
    assert (peeling.rounds, peeling.stopped, peeling.left) == (3, "collects", [])
    assert {t.rsplit("::", 1)[1]: (o.outcome, o.error) for t, o in peeled.tests.items()} == {
        "test_plain": ("passed", ""),
        "test_config": ("failed", GONE.format("vllm.configs.v4.Config", "plugin/patches.py:1", "()")),
        "test_mine": ("failed", GONE.format("vllm.utils.Base", "plugin/patches.py:2", "subclass Mine()")),
        "test_untouched": ("passed", ""),
        "test_gone": ("failed", GONE.format("vllm.utils.gone_fn", f"{TEST_B}:1", "()")),
        "test_mode[NOTSET]": ("skipped", "Skipped: got empty parameter set for (mode)"),  # MODES iterated: empty
    }
    # ORIGINAL = Base.forward and parametrize over MODES ran while collecting: absorbed, and said so
    assert [(u["name"], u["imported_at"], u["use"]) for u in peel.collection_uses(work, "at-vB")] == [
        ("vllm.utils.Base", "plugin/patches.py:2", ".forward"),
        ("vllm.utils.MODES", f"{TEST_C}:2", " iterated"),
    ]
    assert peel.collection_uses(work, "at-vB")[0]["where"] == "plugin/patches.py:4"
    # --reuse-runs judges the same peels and outcomes again from WORK
    reread = peel.reread_peeled("at-vB", tree, work, at_to)
    assert reread is not None and reread[0].to_json() == peeling.to_json() and reread[1].tests == peeled.tests
    # nothing of the tree changed: the stand-ins live in the pytest process only
    assert all((tree / name).read_text("utf-8") == text for name, text in TREE.items())

    outlines = scopes.outlines(tree)
    site_scopes = {str(c["site"]): scopes.scope_of(outlines, str(c["kind"]), str(c["site"])) for c in COUPLINGS}
    couplings = attribute.couplings_of({}, site_scopes, COUPLINGS)
    named = attribute.attribute(outcomes.bump_failures(at_from, peeled), couplings)
    assert {a.test.rsplit("::", 1)[1]: [(h.site, h.upstream, h.rule) for h in a.hits] for a in named} == {
        "test_config": [("plugin/patches.py:1", "vllm.configs.v4.Config", "name")],
        "test_mine": [("plugin/patches.py:2", "vllm.utils.Base", "name")],
        "test_gone": [],  # a name of their test module: no coupling of the tree
    }
    judged = [
        attribute.Coupling(c.kind, c.site, c.upstream, c.status, "breaks", c.scope) for c in couplings
    ]  # impact's verdicts, written here
    named = attribute.attribute(outcomes.bump_failures(at_from, peeled), judged)
    part = results.peeled_part(peeling.to_json(), at_from, peeled, named, judged, judged[:1], [])
    assert (part["bump_failures"], part["failing_on_a_stand_in"]) == (3, 3)
    assert part["absent_at_to"] == {"tests": 2, "first": [f"{TEST_C}::test_mode[a]", f"{TEST_C}::test_mode[b]"]}
    assert part["by_verdict"] == {"breaks": 2, "review": 0, "info": 0, "unjudged": 0, "nothing": 1}
    assert (part["breaks_executed_at_from"], part["breaks_executed_failing_at_to"]) == (1, 1)
    assert (part["breaks_or_review_share"], part["breaks_executed_failing_share"]) == (0.667, 1.0)
    # Python's own refusals, at the statement that raised each (written here from TREE): what a failure at B
    # cannot show once peeling ran past it (test_c's tests are gone from B, its import refused)
    refused = peel.refused_imports("at-vB", tree, work, peeling)
    assert refused == {
        ("plugin/patches.py", 1, "vllm.configs.v4"),
        ("plugin/patches.py", 2, "vllm.utils.Base"),
        (TEST_B, 1, "vllm.utils.gone_fn"),
        (TEST_C, 2, "vllm.utils.MODES"),
    }
    modes = attribute.Coupling(
        "import", f"{TEST_C}:2", "vllm.utils.MODES", "removed", "breaks", scopes.Scope(TEST_C, ((2, 2),))
    )
    both = results.peeled_part(
        peeling.to_json(), at_from, peeled, named, [*judged, modes], [judged[0], modes], [], refused
    )
    assert (both["breaks_executed_hit_by_a_failure"], both["breaks_executed_import_refused"]) == (1, 1)
    assert (both["breaks_executed_failing_at_to"], both["breaks_executed_failing_share"]) == (2, 1.0)
    # a patch or an override of a member under a name Python refused is reached only through it; one of a
    # name whose module imports at B (vllm.utils) is not Python's word
    scope = scopes.Scope("plugin/x.py", ((1, 1),))
    under = [
        attribute.Coupling("patch", "plugin/x.py:1", "vllm.configs.v4.Config.size", "removed", "breaks", scope),
        attribute.Coupling("override", "plugin/x.py:1", "vllm.utils.Base.forward", "removed", "breaks", scope),
        attribute.Coupling("patch", "plugin/x.py:1", "vllm.utils.other_fn", "removed", "breaks", scope),
    ]
    assert [results.refused(c, refused) for c in under] == [True, True, False]
    doc = {"from": "vA", "to": "vB", "peeled": part, "failures": []}
    assert '   {"test": "tests/ut/sub/test_b.py::test_gone"' in results.dumps(doc)  # one failure a line


def test_peel_of_takes_only_a_gone_vllm_name() -> None:
    assert peel.peel_of("ModuleNotFoundError: No module named 'vllm.a.b'") == peel.Peel("vllm.a.b")
    assert peel.peel_of("ImportError: cannot import name 'X' from 'vllm.a' (/x/vllm/a.py)") == peel.Peel("vllm.a", "X")
    assert peel.peel_of("AttributeError: module 'vllm.a' has no attribute 'X'") == peel.Peel("vllm.a", "X")
    assert peel.peel_of("ModuleNotFoundError: No module named 'torch_npu'") is None  # not vLLM's
    assert peel.peel_of("ImportError: cannot import name 'X' from 'vllm_ascend.a'") is None
    assert peel.peel_of("ModuleNotFoundError: No module named 'vllm.a.b'; 'vllm.a' is not a package") is None
    circular = "ImportError: cannot import name 'X' from partially initialized module 'vllm.a' (most likely ...)"
    assert peel.peel_of(circular) is None
    half = "AttributeError: partially initialized module 'vllm.a' has no attribute 'X' (most likely ...)"
    assert peel.peel_of(half) is None
    assert peel.peel_of("TypeError: f() got an unexpected keyword argument 'x'") is None


def stopped_at(*errors: tuple[str, str]) -> outcomes.SuiteRun:
    found = outcomes.SuiteRun()
    for node, error in errors:
        found.collect_errors[node] = outcomes.Outcome(node, "error", error)
    return found


def test_peeling_stops_at_its_limit_and_at_a_blocker_no_stand_in_answers() -> None:
    chain = [stopped_at(("tests/ut/", f"ImportError: cannot import name 'N{i}' from 'vllm.a'")) for i in range(5)]
    asked: list[list[str]] = []

    def collect(round_: int, peels: list[peel.Peel]) -> outcomes.SuiteRun:
        asked.append([p.path for p in peels])
        return chain[round_]

    limited = peel.peel_rounds(chain[0], collect, limit=2)
    assert ([p.peel.path for p in limited.peels], limited.stopped) == (["vllm.a.N0", "vllm.a.N1"], "limit")
    assert asked == [["vllm.a.N0"], ["vllm.a.N0", "vllm.a.N1"]]
    assert limited.left == [{"where": "tests/ut/", "error": "ImportError: cannot import name 'N2' from 'vllm.a'"}]

    bad = "TypeError: register() got an unexpected keyword argument 'x'"
    gone = "ModuleNotFoundError: No module named 'vllm.z'"
    mixed = stopped_at(("tests/ut/a/test_x.py", bad), ("tests/ut/b/test_y.py", gone))
    then = stopped_at(("tests/ut/a/test_x.py", bad))
    stuck = peel.peel_rounds(mixed, lambda round_, peels: then, limit=10)
    assert ([p.peel.path for p in stuck.peels], stuck.rounds, stuck.stopped) == (["vllm.z"], 1, "unpeelable")
    assert stuck.left == [{"where": "tests/ut/a/test_x.py", "error": bad}]
    # the same blocker coming back after its peel is not peeled again
    again = stopped_at(("tests/ut/", gone))
    looped = peel.peel_rounds(again, lambda round_, peels: again, limit=10)
    assert ([p.peel.path for p in looped.peels], looped.stopped) == (["vllm.z"], "unpeelable")


def test_the_raising_rules_precision_leaves_the_silent_rules_apart() -> None:
    # An override of a method B's base dropped stops being called at B (override-gone): no failing test can
    # show it, so the raising rules' precision leaves it out and counts it beside them. Written by hand.
    def made(site: str, rule: str) -> attribute.Coupling:
        return attribute.Coupling(
            "override", site, f"vllm.x.{rule}", "removed", "breaks", scopes.Scope(site, ()), rule=rule
        )

    refused, silent, quiet = (
        made("p/a.py:1", "refuses-b-call"),
        made("p/b.py:1", "override-gone"),
        made("p/c.py:1", "call-refused"),
    )
    failed = attribute.Attributed(
        "t.py::test_a", "TypeError", (attribute.Hit("p/a.py:1", refused.upstream, "breaks", "refuses-b-call"),)
    )
    doc = results.scores([failed], [refused, silent, quiet], [refused, silent, quiet])
    assert (doc["breaks_executed_at_from"], doc["breaks_executed_failing_at_to"]) == (3, 1)
    assert (doc["breaks_raising_executed_at_from"], doc["breaks_raising_executed_failing_at_to"]) == (2, 1)
    assert doc["breaks_raising_executed_failing_share"] == 0.5
    assert (doc["breaks_silent_couplings"], doc["breaks_silent_executed_at_from"]) == (1, 1)

"""A conftest that no longer imports at B stops pytest before any test: every test of A is a bump failure,
named by the coupling in the conftest's import chain (what vllm-ascend's tests/ut/conftest.py does at
vLLM v0.33.0). Run by pytest for real on a tiny tree; the answer is written here by hand."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from balance_dev.suite import cli, outcomes, run
from generator.judge.explain import attribute, scopes

SITE = Path(__file__).resolve().parents[2] / "balance_dev" / "suite" / "site"
TREE = {
    "plugin/__init__.py": "",
    "plugin/patches.py": "import os\nfrom vllm.configs.v4 import Config\n\nPATCHED = Config\n",
    "tests/__init__.py": "",
    "tests/ut/__init__.py": "",
    "tests/ut/conftest.py": "import plugin.patches  # noqa: F401\n",
    "tests/ut/test_a.py": "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n",
    "tests/ut/sub/__init__.py": "",
    "tests/ut/sub/test_b.py": "def test_three():\n    pass\n",
}
RELEASES = {
    "A": {"vllm/__init__.py": "", "vllm/configs/__init__.py": "", "vllm/configs/v4.py": "class Config:\n    pass\n"},
    "B": {"vllm/__init__.py": "", "vllm/configs/__init__.py": ""},  # the module is gone
}
COUPLINGS = [
    {"kind": "import", "site": "plugin/patches.py:2", "upstream": "vllm.configs.v4.Config", "status": "removed"},
    {"kind": "import", "site": "plugin/patches.py:1", "upstream": "os", "status": "unchanged"},
]


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def run_at(tmp: Path, release: str, tree: Path) -> outcomes.SuiteRun:
    site = tmp / release / "site-packages"
    write(site, RELEASES[release])
    records, log = tmp / f"{release}.jsonl", tmp / f"{release}.log"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env |= {"PYTHONPATH": os.pathsep.join([str(SITE), str(site)]), "BALANCE_SUITE_RECORDS": str(records)}
    cmd = [sys.executable, "-m", "pytest", "-p", "balance_suite_pytest", "-p", "no:cacheprovider", "-q"]
    cmd += ["--continue-on-collection-errors", "-c", os.devnull, "--rootdir", str(tree), "tests/ut"]
    with log.open("w", encoding="utf-8") as out:
        subprocess.run(cmd, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    return run.read_run(records, log, tree)


def test_conftest_stop_fails_every_test(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    write(tree, TREE)
    at_from, at_to = run_at(tmp_path, "A", tree), run_at(tmp_path, "B", tree)
    assert at_from.count("passed") == 3 and not at_from.collect_errors
    assert not at_to.tests and sorted(at_to.collect_errors) == ["tests/ut/"]
    stop = at_to.collect_errors["tests/ut/"]
    assert stop.error == "ModuleNotFoundError: No module named 'vllm.configs.v4'"
    assert [(f.path, f.line) for f in stop.frames] == [("tests/ut/conftest.py", 1), ("plugin/patches.py", 2)]
    # the same stop at A is the one line of exit 3
    assert cli.first_collection_error(at_to, tmp_path / "B.log") == (
        "tests/ut/: ModuleNotFoundError: No module named 'vllm.configs.v4'"
    )
    failures = outcomes.bump_failures(at_from, at_to)
    assert [f.test for f in failures] == [
        "tests/ut/sub/test_b.py::test_three",
        "tests/ut/test_a.py::test_one",
        "tests/ut/test_a.py::test_two",
    ]
    outlines = scopes.outlines(tree)
    site_scopes = {str(c["site"]): scopes.scope_of(outlines, str(c["kind"]), str(c["site"])) for c in COUPLINGS}
    named = attribute.attribute(failures, attribute.couplings_of({}, site_scopes, COUPLINGS))
    assert {(h.site, h.upstream, h.rule) for a in named for h in a.hits} == {
        ("plugin/patches.py:2", "vllm.configs.v4.Config", "frame+name")
    }
    assert all(len(a.hits) == 1 for a in named)

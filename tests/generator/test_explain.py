"""``explain`` on a plugin's own test run, as its CI writes it: pytest's JUnit XML.

A small vLLM-shaped pair of releases and a plugin tree are written here; the plugin's tests are run by real
pytest at each release (``--junitxml``), and ``explain`` names each failure of the bump by the coupling this
file planted for it: a patch's function B's code calls with a keyword it does not take (the call rule, by the
function's name), and an import of a name B removed (the name rule). The truth is this file's, read from what
it planted; what it checks of ``explain`` is read from its output.
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

SCHEMA = json.loads((REPO_ROOT / "generator/judge/explain/explain.schema.json").read_text())

A = {
    "vllm/__init__.py": "",
    "vllm/kv.py": """
        def make_coordinator(config, max_len):
            return ("coordinator", config, max_len)


        class Manager:
            def __init__(self, config):
                self.coordinator = make_coordinator(config=config, max_len=8)
    """,
    "vllm/util.py": """
        def gone_fn():
            return 1


        def kept_fn():
            return 2
    """,
}
B = {
    "vllm/__init__.py": "",
    "vllm/kv.py": """
        def make_coordinator(config, max_len, lookahead=0):
            return ("coordinator", config, max_len, lookahead)


        class Manager:
            def __init__(self, config):
                self.coordinator = make_coordinator(config=config, max_len=8, lookahead=1)
    """,
    "vllm/util.py": """
        def kept_fn():
            return 2
    """,
}
TREE = {
    "pkg/__init__.py": "",
    "pkg/patch_kv.py": """
        import vllm.kv as kv


        def make_coordinator(config, max_len):
            return ("mine", config, max_len)


        kv.make_coordinator = make_coordinator
    """,
    "pkg/use.py": """
        def helper():
            from vllm.util import gone_fn

            return gone_fn()
    """,
    "tests/__init__.py": "",
    "tests/test_pkg.py": """
        import vllm.kv as kv

        import pkg.patch_kv  # noqa: F401
        from pkg.use import helper


        def test_manager():
            assert kv.Manager("c").coordinator[0] == "mine"


        def test_helper():
            assert helper() == 1


        def test_kept():
            from vllm.util import kept_fn

            assert kept_fn() == 2


        def test_always_red():
            assert False, "the tree's own failure, at both releases"
    """,
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def _pytest(tree: Path, release: Path, out: Path, tb: str) -> Path:
    env = {"PYTHONPATH": f"{tree}:{release}", "PATH": "/usr/bin:/bin"}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--tb={tb}",
        f"--junitxml={out}",
        "tests",
    ]
    subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    assert out.is_file()
    return out


@pytest.fixture
def runs(tmp_path: Path, local_index: dict[str, bytes]) -> dict[str, Path]:
    releases = {}
    for version, files in (("4.0.0", A), ("4.1.0", B)):
        root = _write(tmp_path / f"vllm-{version}", files)
        local_index[wheel_name(version)] = wheel_of(version, {rel: (root / rel).read_bytes() for rel in files})
        releases[version] = root
    tree = _write(tmp_path / "plugin", TREE)
    return {
        "tree": tree,
        "at_from": _pytest(tree, releases["4.0.0"], tmp_path / "at-a.xml", "short"),
        "at_to": _pytest(tree, releases["4.1.0"], tmp_path / "at-b.xml", "short"),
        "at_to_long": _pytest(tree, releases["4.1.0"], tmp_path / "at-b-long.xml", "long"),
    }


def _explain(runs: dict[str, Path], *extra: str, results: str = "at_to") -> tuple[int, str, str]:
    args = ["--root", str(runs["tree"]), "explain", str(runs[results]), "--from", "v4.0.0", "--to", "v4.1.0", *extra]
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.stdout, result.stderr


def _line_of(tree: Path, rel: str, text: str) -> int:
    return next(n for n, line in enumerate((tree / rel).read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize("results", ["at_to", "at_to_long"])
def test_each_failure_of_the_bump_is_named_by_the_coupling_planted_for_it(runs: dict[str, Path], results: str) -> None:
    code, out, err = _explain(runs, "--at-from", str(runs["at_from"]), "--format", "json", results=results)
    assert code == 0, err
    found: dict[str, Any] = json.loads(out)
    jsonschema.validate(found, SCHEMA)
    tree = runs["tree"]
    patch_line = _line_of(tree, "pkg/patch_kv.py", "kv.make_coordinator = make_coordinator")
    import_line = _line_of(tree, "pkg/use.py", "from vllm.util import gone_fn")
    by_test = {t: g for g in found["groups"] for t in g["test_ids"]}
    assert set(by_test) == {"tests/test_pkg.py::test_manager", "tests/test_pkg.py::test_helper"}  # the bump's two
    manager = by_test["tests/test_pkg.py::test_manager"]
    assert "make_coordinator() got an unexpected keyword argument 'lookahead'" in manager["error"]
    sites = {(c["site"], c["upstream"], c["verdict"]) for c in manager["couplings"]}
    assert (f"pkg/patch_kv.py:{patch_line}", "vllm.kv.make_coordinator", "breaks") in sites
    helper = by_test["tests/test_pkg.py::test_helper"]
    assert (f"pkg/use.py:{import_line}", "vllm.util.gone_fn", "breaks") in {
        (c["site"], c["upstream"], c["verdict"]) for c in helper["couplings"]
    }
    assert found["by_verdict"]["breaks"] == 2 and found["failures"] == 2
    assert [t["test"] for t in found["theirs"]] == ["tests/test_pkg.py::test_always_red"]


def test_without_the_run_at_a_every_failure_is_explained_and_the_tree_own_is_nothing(runs: dict[str, Path]) -> None:
    code, out, err = _explain(runs, "--format", "json")
    assert code == 0, err
    found = json.loads(out)
    assert found["failures"] == 3 and found["by_verdict"]["nothing"] == 1 and found["theirs"] == []
    assert [g["verdict"] for g in found["groups"]] == ["breaks", "breaks", "nothing"]  # breaks lead


def test_text_markdown_and_github_lead_with_breaks(runs: dict[str, Path]) -> None:
    code, out, _ = _explain(runs, "--at-from", str(runs["at_from"]))
    assert code == 0 and out.splitlines()[0].startswith("2 failing tests, v4.0.0 -> v4.1.0: 2 on breaks")
    assert "[breaks] 1 tests: TypeError: make_coordinator() got an unexpected keyword argument 'lookahead'" in out
    code, md, _ = _explain(runs, "--at-from", str(runs["at_from"]), "--format", "markdown")
    assert code == 0 and md.startswith("### What the bump's failures hit")
    assert (
        "upstream's diff of vllm.kv.make_coordinator" in md
        and "+def make_coordinator(config, max_len, lookahead=0):" in md
    )
    code, gh, _ = _explain(runs, "--at-from", str(runs["at_from"]), "--format", "github")
    patch_line = _line_of(runs["tree"], "pkg/patch_kv.py", "kv.make_coordinator = make_coordinator")
    assert code == 0 and f"::error file=pkg/patch_kv.py,line={patch_line},title=vLLM bump::" in gh


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "is empty"),
        (b"not xml at all", "is not XML"),
        (b"<report><item/></report>", "is XML but not JUnit XML"),
        (
            b'<testsuites><testsuite><testcase classname="other.tests.test_x" name="test_y"/></testsuite></testsuites>',
            "no test of",
        ),
    ],
)
def test_bad_results_are_one_line_and_exit_2(runs: dict[str, Path], tmp_path: Path, content: bytes, says: str) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_bytes(content)
    runs = {**runs, "bad": bad}
    code, out, err = _explain(runs, results="bad")
    assert code == 2 and out == "", err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and says in lines[0], err


def test_the_ci_snippet_runs_explain_as_written(runs: dict[str, Path]) -> None:
    """templates/explain-comment.yml's explain commands, run as written against this file's results."""
    text = (REPO_ROOT / "templates/explain-comment.yml").read_text()
    commands = text.split("run: |\n", 1)[1].split("      - name: comment", 1)[0]
    joined = commands.replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines() if "balance-patchgen" in line and " explain " in line]
    assert len(lines) == 2
    for line in lines:
        words = line.split(">")[0].split()
        args = [w.replace('"$VLLM_TO"', "v4.1.0") for w in words[1:]]
        args = [str(runs["tree"]) if a == "." else a for a in args]
        args = [
            str(runs["at_to"]) if a == "results-to.xml" else str(runs["at_from"]) if a == "results-from.xml" else a
            for a in args
        ]
        result = CliRunner().invoke(main, [*args, "--from", "v4.0.0"])
        assert result.exit_code == 0, result.stderr
        assert "make_coordinator" in result.stdout


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "E   TypeError: f() got an unexpected keyword argument 'x'",
            "TypeError: f() got an unexpected keyword argument 'x'",
        ),
        # raised inside mock.py's own frame: pytest indents the E line further
        (
            "E           AttributeError: <class 'A'> does not have the attribute 'b'",
            "AttributeError: <class 'A'> does not have the attribute 'b'",
        ),
        # a module's exception is named with its module by pytest; by its name alone, as Python's type name
        ("E   pkg.errors.GoneAtB: vllm.x is not in vLLM B", "GoneAtB: vllm.x is not in vLLM B"),
        ("E       assert 1 == 2\nE        +  where 1 = f()", ""),
        ("E   StopIteration", "StopIteration"),
    ],
)
def test_the_error_is_read_from_pytest_s_e_line(text: str, error: str) -> None:
    from generator.judge.explain.junit import _first_error

    assert _first_error(text) == error

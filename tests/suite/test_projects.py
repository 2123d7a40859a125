"""--project: vllm-ascend's defaults as they were, and vllm-spyre's facts read from a tiny tree written here (its
pyproject's pin against a loopback index, its test.yml's step, its dev packages), then a real pytest run the
way that step runs: its markers deselect, its environment reaches the tests. The truth is written by hand."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from balance_dev.downstream import REPO_ROOT, HarnessError
from balance_dev.package_index import serve
from balance_dev.suite import cli, projects, run

SITE = Path(__file__).resolve().parents[2] / "balance_dev" / "suite" / "site"
PYPROJECT = """\
[project]
name = "plug"
dependencies = [
    "fms-thing[fp8]>=0.8.2,<0.9",
    # a comment, as theirs have
    "vllm>=0.18.0,<0.18.2",
    "torch",
    "torchvision",
    "numpy<2.3; python_version < '3'",
]

[tool.pytest.ini_options]
pythonpath = ["."]
markers = ["e2e: engine", "spyre: hardware", "cpu: eager"]

[dependency-groups]
dev = [
    "pytest==8.3.4",
    "pytest-timeout==2.3.1",
    "requests==2.32.3",
    "sentence-transformers==3.4.1",
    "aiu-fms-testing-utils>=0.5.0",
    "pytest-mock>=3.15.0",
]
"""
# The shape of their .github/workflows/test.yml: a matrix of suites, the workflow's env, the step's env.
WORKFLOW = """\
env:
  FORCE_COLOR: "1"
  VLLM_CPU_DISABLE_AVX512: "true"
  VLLM_TARGET_DEVICE: "empty"
  VLLM_PLUGINS: "spyre"
jobs:
  test:
    strategy:
      matrix:
        test_suite:
          - name: "embedding"
            markers: "cpu and embedding and not quantized"
            flags: "--timeout=300"
            hf_model: "sentence-transformers/all-roberta-large-v1"
          - name: "worker and utils"
            markers: "not e2e and not quantized and not spyre and not multimodal"
            flags: "--timeout=250"
          - name: "multimodal"
            markers: "cpu and multimodal"
            flags: "--timeout=300 -sv"
    steps:
      - name: "Run tests"
        env:
          MASTER_PORT: 12355
          MASTER_ADDR: localhost
          DISTRIBUTED_STRATEGY_IGNORE_MODULES: WordEmbedding
          VLLM_SPYRE_TEST_MODEL_LIST: ""
          HF_HUB_OFFLINE: 1
        run: |
          python3 -m pytest ${{ matrix.test_suite.flags }} \\
            tests -v -m "${{ matrix.test_suite.markers }}"
"""
MARKERS = "not e2e and not quantized and not spyre and not multimodal"
TESTS = {
    "tests/__init__.py": "",
    "tests/utils/__init__.py": "",
    "tests/utils/test_env.py": (
        "import os\n\nimport pytest\n\n\n"
        "def test_plugins():\n    assert os.environ['VLLM_PLUGINS'] == 'spyre'\n\n\n"
        "def test_offline():\n    assert os.environ['HF_HUB_OFFLINE'] == '1'\n\n\n"
        "def test_no_modelscope():\n    assert 'VLLM_USE_MODELSCOPE' not in os.environ  # vllm-ascend's\n\n\n"
        "@pytest.mark.spyre\ndef test_card():\n    raise AssertionError('needs a card')\n"
    ),
    "tests/e2e/__init__.py": "",
    "tests/e2e/test_engine.py": "def test_engine():\n    raise AssertionError('marked e2e by path in theirs')\n",
}


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def spyre_tree(root: Path) -> Path:
    write(root, {"pyproject.toml": PYPROJECT, ".github/workflows/test.yml": WORKFLOW, **TESTS})
    # theirs marks tests/e2e/* e2e in its conftest's collection hook; the same here, in three lines
    write(root, {"tests/conftest.py": (
        "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
        "    for item in items:\n        if 'e2e' in item.nodeid:\n            item.add_marker(pytest.mark.e2e)\n"
    )})  # fmt: skip
    return root


def wheel(version: str, arch: str = "x86_64") -> str:
    return f"vllm-{version}-cp38-abi3-manylinux_2_31_{arch}.whl"


def test_vllm_ascend_is_the_default_and_its_defaults_are_unchanged() -> None:
    args = cli.parse_args([])
    assert (args.project, args.version, args.to, args.tests) == ("vllm-ascend", "0.30.0rc2", "v0.33.0", ["tests/ut"])
    assert args.timeout is None and projects.ASCEND.ci(Path("/nowhere")) == run.ASCEND and run.ASCEND.timeout == 120
    assert (args.venvs, args.work) == (REPO_ROOT / ".venv-suite", REPO_ROOT / "build/suite")
    assert args.out == REPO_ROOT / "benchmarks/results/suite-vllm-ascend-0.30.0rc2.json"
    assert projects.ASCEND.tree_name("0.30.0rc2") == "vllm_ascend-0.30.0rc2"
    argv = ["--version", "0.29.0rc1", "--to", "v0.30.0"]
    assert cli.rerun_command(argv) == ".venv/bin/python -m balance_dev.suite --version 0.29.0rc1 --to v0.30.0"
    assert run.suite_command(Path("py"), ["tests/ut"], 120, None)[:6] == [
        "py", "-m", "pytest", "-sv", "--color=no", "--continue-on-collection-errors",
    ]  # fmt: skip


def test_vllm_spyre_defaults() -> None:
    args = cli.parse_args(["--project", "vllm-spyre"])
    assert (args.version, args.to, args.tests, args.timeout) == ("2.0.0rc9", "v0.19.0", ["tests"], None)
    assert args.venvs == REPO_ROOT / ".venv-suite-spyre"  # never one of vllm-ascend's venvs of the same vLLM
    assert args.out == REPO_ROOT / "benchmarks/results/suite-vllm-spyre-2.0.0rc9.json"
    assert projects.SPYRE_PROJECT.tree_name("2.0.0rc9") == "vllm_spyre-2.0.0rc9"


def test_the_pin_is_the_newest_release_in_their_requirement_with_a_wheel(tmp_path: Path) -> None:
    tree = spyre_tree(tmp_path)
    files = {
        wheel("0.17.1"): b"w",
        wheel("0.18.0"): b"w",
        "vllm-0.18.1.tar.gz": b"s",  # an sdist only: nothing to install on CPU torch
        wheel("0.18.1", "aarch64"): b"w",  # not this machine's
        wheel("0.18.2rc1"): b"w",  # below 0.18.2, a pre-release: the specifier does not name one
        wheel("0.18.2"): b"w",
    }
    with serve(files) as url:
        assert projects.pyproject_pin(tree, url) == "0.18.0"
    with serve({**files, wheel("0.18.1"): b"w"}) as url:
        assert projects.pyproject_pin(tree, url) == "0.18.1"
    with serve({wheel("0.19.0"): b"w"}) as url, pytest.raises(HarnessError, match="no vLLM release in"):
        projects.pyproject_pin(tree, url)
    (tree / "pyproject.toml").write_text('[project]\ndependencies = ["torch"]\n', encoding="utf-8")
    with pytest.raises(HarnessError, match="requires no vllm"):
        projects.pyproject_pin(tree, "http://127.0.0.1:9/never-asked")


def test_their_ci_step_is_read_from_the_tree_and_checked(tmp_path: Path) -> None:
    tree = spyre_tree(tmp_path)
    ci = projects.spyre_ci(tree)
    assert ci.args == ("-v", "--color=no", "--continue-on-collection-errors", "-m", MARKERS)
    assert ci.timeout == 250  # theirs, as the file says
    assert ci.env["VLLM_TARGET_DEVICE"] == "empty" and ci.env["MASTER_PORT"] == "12355"
    assert "FORCE_COLOR" not in ci.env
    workflow = tree / ".github/workflows/test.yml"
    for old, new, said in [
        ('VLLM_PLUGINS: "spyre"', 'VLLM_PLUGINS: "spyre,other"', "VLLM_PLUGINS: spyre"),
        ('- name: "worker and utils"', '- name: "workers"', "no test suite named 'worker and utils'"),
        ('flags: "--timeout=250"', 'flags: "--timeout=250 --forked"', "flags '--timeout=250 --forked'"),
        ("tests -v -m", "tests/unit -v -m", "tests -v -m"),
    ]:
        workflow.write_text(WORKFLOW.replace(old, new), encoding="utf-8")
        with pytest.raises(HarnessError, match=r"their CI changed|not known here") as caught:
            projects.spyre_ci(tree)
        assert said in str(caught.value)


def test_their_requirements_and_dev_packages(tmp_path: Path) -> None:
    tree = spyre_tree(tmp_path)
    deps = projects.requirements(tree, "project", "dependencies")
    installed = {"fms-thing": "0.7.0", "numpy": "2.3.1"}
    # vllm, torch, torchvision: installed otherwise; numpy: its marker is false here; fms-thing: vLLM's kept
    assert projects.wanted(deps, projects.SPYRE_NOT_INSTALLED, {}) == (["fms-thing[fp8]<0.9,>=0.8.2"], [])
    assert projects.wanted(deps, projects.SPYRE_NOT_INSTALLED, installed) == (
        [],
        ["kept fms-thing 0.7.0 (vLLM's), their pyproject.toml asks <0.9,>=0.8.2"],
    )
    no_extras = {"fms-thing": frozenset({"fp8", "other"})}
    assert projects.wanted(deps, projects.SPYRE_NOT_INSTALLED, {}, no_extras) == (
        ["fms-thing<0.9,>=0.8.2"],
        ["fms-thing without its extra fp8 (projects.py says why)"],
    )
    assert projects.spyre_dev(tree) == [
        "coverage",
        "pytest-asyncio",
        "pytest-forked",
        "pytest-mock>=3.15.0",
        "pytest-timeout==2.3.1",
        "pytest==8.3.4",
        "sentence-transformers==3.4.1",
    ]  # requests and aiu-fms-testing-utils left out (projects.py says why)


def test_a_run_as_their_step_runs_it(tmp_path: Path) -> None:
    tree, work = spyre_tree(tmp_path / "tree"), tmp_path / "work"
    work.mkdir()
    ci = projects.spyre_ci(tree)
    python, site = Path(sys.executable), {"PYTHONPATH": str(SITE)}
    found = run.run_suite("at-from", python, tree, work, ["tests"], 60, extra_env=site, ci=ci)
    assert {t: o.outcome for t, o in found.tests.items()} == {
        "tests/utils/test_env.py::test_plugins": "passed",
        "tests/utils/test_env.py::test_offline": "passed",
        "tests/utils/test_env.py::test_no_modelscope": "passed",
    }  # test_card (spyre) and test_engine (e2e) deselected
    command = f"-v --color=no --continue-on-collection-errors -m {shlex.quote(MARKERS)} "
    assert command in (work / "at-from.log").read_text("utf-8")

"""The plugins the suite runs (``--project``): where each one's tree, vLLM pin, venv and CI step come from.

vllm-ascend (the default) is what downstream.py, venvs.py and ``run.ASCEND`` always did: its sdist with the
``_build_info.py`` their setup.py writes, the pin file, requirements.txt and requirements-dev.txt, the
``cpu-ut`` job's environment and flags.

vllm-spyre keeps all of it in ``pyproject.toml`` and ``.github/workflows/test.yml``, both in its sdist:

- the pin is its ``vllm`` requirement (``vllm>=0.18.0,<0.18.2`` at 2.0.0rc9): the newest vLLM release in
  it with a wheel on the package index to install on CPU torch;
- its venv: vLLM on the CPU build of torch (.ci/install-vllm, as for vllm-ascend: their uv override pins
  torch 2.10.0, the CPU torch here is .ci/install-vllm's), torchvision paired with it (--no-deps, behind
  ``make downstream``'s import guard) and ``[project].dependencies`` with vLLM's closure as constraints,
  fms-model-optimizer without its ``fp8`` extra (SPYRE_NO_EXTRAS says why).
  The tree is not installed (their CI installs its wheel and deletes the source): pytest runs from the
  tree's root, so their package is the tree's (coverage and ``--adapt`` see their files) and the sdist's
  ``vllm_spyre.egg-info`` on the path registers the ``vllm.platform_plugins`` entry point that
  ``VLLM_PLUGINS=spyre`` loads, as vllm-ascend's egg-info does for it.
- the suite packages: ``[dependency-groups].dev`` minus ``requests`` (vLLM's closure has it) and
  ``aiu-fms-testing-utils`` (it requires torch<=2.12.0; only tests/aftu runs it, in a subprocess, in
  tests marked ``spyre``, which the CI step deselects);
- the CI step: test.yml's ``worker and utils`` suite, the one whose flags name no model:
  ``python3 -m pytest --timeout=300 tests -v -m "not e2e and not quantized and not spyre and not
  multimodal"`` with the workflow's and the step's environment (below). The markers and the timeout are
  read from the tree's test.yml; a workflow that no longer has that suite, that command or that
  environment stops the run (exit 4) rather than run something their CI does not.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from balance_dev import downstream, plugin_trees
from balance_dev.downstream import NICE, PIP, HarnessError, must, say
from balance_dev.suite import run, venvs
from generator.sources import index

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project's machines run 3.11
    import tomli as tomllib


@dataclass(frozen=True)
class Project:
    name: str  # on the package index
    version: str  # the release --version defaults to
    to: str  # the vLLM B --to defaults to
    tests: tuple[str, ...]  # --tests' default
    venv_prefix: str  # --venvs' default prefix: venvs are keyed by vLLM version, never shared between projects
    tree: Callable[[str, Path], Path]  # (release, WORK/tree) -> the tree, extracted fresh
    pinned_vllm: Callable[[Path], str]
    ci: Callable[[Path], run.CI]  # their CI step, read from the tree where it is there
    base_venv: venvs.BaseVenv
    dev: venvs.DevPackages

    def tree_name(self, version: str) -> str:
        """The folder the sdist unpacks to: ``vllm_ascend-0.30.0rc2``."""
        return plugin_trees.sdist_name(self.name, version).removesuffix(".tar.gz")


def ascend_tree(version: str, dest: Path) -> Path:
    return downstream.extract_tree(downstream.sdist_bytes(version), dest, version)


ASCEND = Project(
    name=downstream.PROJECT,
    version=downstream.DEFAULT_VERSION,
    to="v0.33.0",
    tests=("tests/ut",),
    venv_prefix=".venv-suite",
    tree=ascend_tree,
    pinned_vllm=downstream.pinned_vllm,
    ci=lambda tree: run.ASCEND,
    base_venv=downstream.ensure_venv,
    dev=venvs.dev_requirements,
)

# ---------------------------------------------------------------------------------------------------------
# vllm-spyre

SPYRE = "vllm-spyre"
SPYRE_WORKFLOW = Path(".github/workflows/test.yml")
SPYRE_SUITE = "worker and utils"
# Their step: `python3 -m pytest ${{ matrix.test_suite.flags }} tests -v -m "${{ matrix.test_suite.markers }}"`
SPYRE_COMMAND = 'tests -v -m "${{ matrix.test_suite.markers }}"'
SPYRE_TESTS = ("tests",)
# test.yml's workflow env and its "Run tests" step's env. Left out: FORCE_COLOR (the log is read, and
# --color=no says the same), HF_HUB_CACHE and DEFAULT_HF_MODEL(_REV) (the cache their CI restores a model
# into; none here: HF_HUB_OFFLINE=1, as in their step, so a test that needs a model fails at A and B).
SPYRE_ENV = {
    "VLLM_CPU_DISABLE_AVX512": "true",
    "VLLM_TARGET_DEVICE": "empty",
    "VLLM_PLUGINS": "spyre",
    "MASTER_PORT": "12355",
    "MASTER_ADDR": "localhost",
    "DISTRIBUTED_STRATEGY_IGNORE_MODULES": "WordEmbedding",
    "VLLM_SPYRE_TEST_MODEL_LIST": "",
    "HF_HUB_OFFLINE": "1",
}
# The suite's own flags beside theirs (-v -m MARKERS), as for vllm-ascend (run.py says why).
SPYRE_OURS = ("--color=no", "--continue-on-collection-errors")
# [project].dependencies not installed: .ci/install-vllm's vLLM and CPU torch, torchvision paired by version.
SPYRE_NOT_INSTALLED = frozenset({"vllm", "torch", "torchvision"})
# Extras not installed. fms-model-optimizer[fp8] is llmcompressor and torchao==0.11: no llmcompressor release
# installs here (each caps torch, <=2.10.0 for 0.10.x, <=2.12.0 for 0.12.x, below the CPU torch 2.13.0, and
# pins compressed-tensors exactly, never vLLM 0.18.1's 0.13.0 beside a torch that fits). fms_mo imports neither
# on import (optional packages: quantizing a model, loading an FP8 checkpoint): the quantized tests, deselected.
SPYRE_NO_EXTRAS = {"fms-model-optimizer": frozenset({"fp8"})}
# From [dependency-groups].dev, what the tests import or run with (their bounds are kept, read from the file).
SPYRE_FROM_DEV = ("pytest", "pytest-asyncio", "pytest-forked", "pytest-mock", "pytest-timeout", "sentence-transformers")
SPYRE_STAMP_FORMAT = 1


def spyre_tree(version: str, dest: Path) -> Path:
    try:
        tree = plugin_trees.unpack(plugin_trees.sdist_bytes(SPYRE, version), dest)
    except plugin_trees.TreeUnavailable as exc:
        raise HarnessError(str(exc)) from None
    missing = [p for p in ("pyproject.toml", "tests/conftest.py", str(SPYRE_WORKFLOW)) if not (tree / p).is_file()]
    if missing:
        raise HarnessError(f"the sdist of {SPYRE} {version} lacks {', '.join(missing)}: the suite needs its tests")
    return tree


def pyproject(tree: Path) -> dict[str, object]:
    try:
        loaded: dict[str, object] = tomllib.loads((tree / "pyproject.toml").read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise HarnessError(f"{tree / 'pyproject.toml'}: {exc}") from None
    return loaded


def requirements(tree: Path, *keys: str) -> list[Requirement]:
    """The requirement strings at ``keys`` of the tree's pyproject.toml (``project``, ``dependencies``)."""
    found: object = pyproject(tree)
    for key in keys:
        found = found.get(key, []) if isinstance(found, dict) else []
    if not isinstance(found, list):
        raise HarnessError(f"{tree / 'pyproject.toml'}: {'.'.join(keys)} is not a list")
    try:
        return [Requirement(line) for line in found if isinstance(line, str)]
    except InvalidRequirement as exc:
        raise HarnessError(f"{tree / 'pyproject.toml'}: {'.'.join(keys)}: {exc}") from None


def wheel_versions(index_url: str | None = None) -> list[Version]:
    """vLLM's releases with a wheel that installs on this machine (x86_64 Linux or any platform), sorted."""
    out = set()
    for found in index.list_files("vllm", index_url):
        name = found.filename
        if name.endswith(".whl") and ("x86_64" in name or "-any." in name):
            try:
                out.add(Version(name.split("-")[1]))
            except InvalidVersion:
                continue
    return sorted(out)


def pyproject_pin(tree: Path, index_url: str | None = None) -> str:
    """The newest vLLM release the tree's ``vllm`` requirement admits that has a wheel on the index."""
    specs = [r.specifier for r in requirements(tree, "project", "dependencies") if canonicalize_name(r.name) == "vllm"]
    if not specs:
        raise HarnessError(f"{tree / 'pyproject.toml'} requires no vllm: there is no pin to read")
    fits = [v for v in wheel_versions(index_url) if specs[0].contains(v)]
    if not fits:
        raise HarnessError(f"no vLLM release in {specs[0]} has a wheel on the package index to install on CPU")
    return str(max(fits))


def env_line(name: str, value: str) -> str:
    return rf'^\s*{name}: "?{re.escape(value)}"?\s*$'


def spyre_ci(tree: Path) -> run.CI:
    """test.yml's worker-and-utils step: its markers and timeout read from the tree, checked against the rest."""
    path = tree / SPYRE_WORKFLOW
    text = path.read_text("utf-8")
    start = re.search(rf'^(\s*)- name: "{re.escape(SPYRE_SUITE)}"\s*$', text, re.M)
    if start is None:
        raise HarnessError(f"{path} has no test suite named {SPYRE_SUITE!r}: their CI changed")
    block = []
    for line in text[start.end() :].splitlines()[1:]:
        if not line.startswith(start[1] + "  ") or not line.strip():  # the suite's own keys only
            break
        block.append(line.strip())
    keys = dict(line.split(": ", 1) for line in block if ": " in line)
    markers, flags = keys.get("markers", "").strip('"'), keys.get("flags", "").strip('"')
    timeouts = [int(m[1]) for flag in shlex.split(flags) if (m := re.fullmatch(r"--timeout=(\d+)", flag))]
    if not markers or len(timeouts) != 1 or len(shlex.split(flags)) != 1:
        raise HarnessError(f"{path}: suite {SPYRE_SUITE!r} has markers {markers!r}, flags {flags!r}: not known here")
    missing = [f"{k}: {v}" for k, v in SPYRE_ENV.items() if not re.search(env_line(k, v), text, re.M)]
    if SPYRE_COMMAND not in text:
        missing.append(SPYRE_COMMAND)
    if missing:
        raise HarnessError(f"{path} no longer has {'; '.join(missing)}: their CI changed")
    return run.CI(SPYRE_ENV, ("-v", *SPYRE_OURS, "-m", markers), timeouts[0])


def wanted(
    reqs: list[Requirement],
    skip: frozenset[str],
    installed: dict[str, str],
    no_extras: Mapping[str, frozenset[str]] | None = None,
) -> tuple[list[str], list[str]]:
    """(to install, notes): ``reqs`` minus ``skip``, ``no_extras`` and what is installed (vLLM's closure wins)."""
    out, notes = [], []
    for req in reqs:
        name = canonicalize_name(req.name)
        if name in skip or (req.marker is not None and not req.marker.evaluate()):
            continue
        if dropped := sorted(req.extras & (no_extras or {}).get(name, frozenset())):
            req = Requirement(str(req))
            req.extras -= set(dropped)
            notes.append(f"{req.name} without its extra {', '.join(dropped)} (projects.py says why)")
        have = installed.get(name)
        if have is None:
            out.append(str(req))
        elif req.specifier and not req.specifier.contains(have, prereleases=True):
            notes.append(f"kept {req.name} {have} (vLLM's), their pyproject.toml asks {req.specifier}")
    return out, notes


def spyre_stamp(vllm: str, tree: Path) -> str:
    deps = [str(r) for r in requirements(tree, "project", "dependencies")]
    inputs = {"format": SPYRE_STAMP_FORMAT, "project": SPYRE, "vllm": vllm, "dependencies": deps}
    return json.dumps(inputs, sort_keys=True)


def spyre_venv(venv: Path, vllm: str, tree: Path, log: Path) -> None:
    """``venv`` with vLLM ``vllm`` and their dependencies; a stamp keyed by both skips it on reruns."""

    def their_dependencies(python: Path) -> None:
        installed = downstream.with_torchvision(python, log)
        deps = requirements(tree, "project", "dependencies")
        packages, notes = wanted(deps, SPYRE_NOT_INSTALLED, installed, SPYRE_NO_EXTRAS)
        for note in notes:
            say(note)
        constraints = venv / "spyre-constraints.txt"
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(installed.items())), encoding="utf-8")
        say(f"{venv.name}: installing {', '.join(packages)}")
        must([*NICE, str(python), *PIP, "-c", str(constraints), *packages], log, "installing their dependencies")

    downstream.stamped_venv(venv, vllm, log, ".spyre", spyre_stamp(vllm, tree), their_dependencies)


def spyre_dev(tree: Path) -> list[str]:
    found = {canonicalize_name(r.name): str(r) for r in requirements(tree, "dependency-groups", "dev")}
    return sorted({found.get(canonicalize_name(name), name) for name in (*SPYRE_FROM_DEV, *venvs.OURS)})


SPYRE_PROJECT = Project(
    name=SPYRE,
    version="2.0.0rc9",
    to="v0.19.0",
    tests=SPYRE_TESTS,
    venv_prefix=".venv-suite-spyre",
    tree=spyre_tree,
    pinned_vllm=pyproject_pin,
    ci=spyre_ci,
    base_venv=spyre_venv,
    dev=spyre_dev,
)

PROJECTS = {p.name: p for p in (ASCEND, SPYRE_PROJECT)}

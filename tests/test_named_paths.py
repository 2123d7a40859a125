"""Every path of this repository that a message, doc or comment names exists.

A message that says "re-anchor it in generator/deltas.py" after the module moved sends a maintainer to a
file that is not there. Read from the tracked files themselves: source (messages and comments alike),
docs, the Makefile, workflows and templates. Only this repository's own folders are checked: a doc that
names vLLM's files (``vllm/v1/...``) or a plugin tree's (vllm-ascend's ``tests/ut/...``) names another
repository. ``vllm_ascend/`` is both this project's reference runtime and vllm-ascend's package, so it is
not checked either.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from balance_dev.project_files import REPO_ROOT

# This repository's own top-level folders whose files are named in prose.
OWN = ("generator", "balance_dev", "benchmarks", "e2e", "templates", "runtime", "generated", "docs", ".ci")
# tests/ is ours only in the folders this repository has: vLLM's (tests/v1/...) and vllm-ascend's
# (tests/ut/...) suites are named as theirs.
OWN_TESTS = re.compile(r"tests/(?:generator|runtime|value_sim|[\w]+\.py$)")
# Files a command writes where asked (`regen --main-verified`), named before they exist.
WRITTEN = ("generated/balance_scheduler_main_verified.py",)
NAMED = re.compile(
    r"(?<![\w./-])((?:" + "|".join(re.escape(f) for f in OWN) + r"|tests)/[\w./-]*\.(?:py|md|toml|json|j2|yml|txt))\b"
)
# What a past run printed (profiles, logs): its paths were true then and are not prose.
RECORDED = ("benchmarks/results/",)
READ = (".py", ".md", ".toml", ".yml", ".yaml", ".j2", ".txt", ".cfg")


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    return [
        p
        for p in out.splitlines()
        if (p.endswith(READ) or p in ("Makefile", ".ci/run") or p.startswith(".ci/"))
        and not p.startswith(RECORDED)
        # Tests name the files of the small trees and releases they write; they are checked by running.
        and not p.startswith("tests/")
    ]


def named_paths(text: str) -> set[str]:
    """The repository paths ``text`` names (``tests/ut/...``, another repository's, left out)."""
    found = set()
    for match in NAMED.finditer(text):
        path = match.group(1).rstrip(".")
        if path.startswith("tests/") and not OWN_TESTS.match(path):
            continue
        found.add(path)
    return found


def _pattern(named: str) -> bool:
    capitals = set(re.findall(r"(?<![A-Za-z])[A-Z][A-Z_]+(?![a-z])", named)) - {"README"}
    return any(c in named for c in "*<>{}") or bool(capitals)


def _missing() -> dict[str, list[str]]:
    missing: dict[str, list[str]] = {}
    for name in _tracked():
        path = REPO_ROOT / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for named in sorted(named_paths(text)):
            # A glob or a placeholder (``data/deltas/<family>.in.py``, ``suite-vllm-ascend-VERSION.json``)
            # names a pattern, not a file.
            if _pattern(named) or named in WRITTEN or (REPO_ROOT / named).exists():
                continue
            missing.setdefault(named, []).append(name)
    return missing


def test_every_named_repository_path_exists() -> None:
    missing = _missing()
    assert not missing, "\n".join(f"{p} (named in {', '.join(where)})" for p, where in sorted(missing.items()))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("re-anchor it in generator/deltas.py or keep the pin", {"generator/deltas.py"}),
        ("see `docs/cli.md`.", {"docs/cli.md"}),
        ("their tests/ut/conftest.py mocks torch_npu", set()),
        ("vllm/v1/core/sched/scheduler.py at the tag", set()),
        ("tests/generator/test_deltas.py holds it", {"tests/generator/test_deltas.py"}),
        ("vLLM's tests/v1/core/test_scheduler.py", set()),
        ("written to benchmarks/results/suite-TREE-VERSION.json", {"benchmarks/results/suite-TREE-VERSION.json"}),
        ("in vllm_ascend/core/recompute_scheduler.py", set()),
    ],
)
def test_what_counts_as_a_named_path(text: str, expected: set[str]) -> None:
    assert named_paths(text) == expected


def test_a_stale_path_is_found() -> None:
    # The checker itself must be able to fail: a path that does not exist is reported.
    assert not (REPO_ROOT / "generator/deltas.py").exists()
    assert "generator/deltas.py" in named_paths("re-anchor it in generator/deltas.py")


@pytest.mark.parametrize(
    ("named", "pattern"),
    [("benchmarks/results/suite-vllm-ascend-VERSION.json", True), ("docs/<page>.md", True), ("e2e/README.md", False)],
)
def test_a_placeholder_names_a_pattern_a_readme_does_not(named: str, pattern: bool) -> None:
    assert _pattern(named) is pattern

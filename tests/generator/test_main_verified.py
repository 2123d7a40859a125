"""Both refs the consumer runs: the pin's tag and the main-verified commit of vLLM (read from a git checkout).

The vLLM repository is real (gitpython), built from real released files: a tag, then ``main`` moving on
with one statement of ``schedule()`` changed, the commit vllm-ascend's CI would verify.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from balance_dev import consumer_tree
from balance_dev.cli_run import run
from balance_dev.upstream_repo import build_vllm_repo
from generator.builder import verify
from generator.pins.refs import MAIN_VERIFIED_FILE
from generator.sources import cache
from generator.sources.base import UpstreamFile

MAIN_STATEMENT = "token_budget = self.max_num_scheduled_tokens"
CHANGED = "token_budget = self.max_num_scheduled_tokens - 0  # main moved on"


def _moved_on(upstream: UpstreamFile) -> bytes:
    text = upstream.text
    assert text.count(MAIN_STATEMENT) == 1
    return text.replace(MAIN_STATEMENT, CHANGED).encode()


@pytest.fixture
def vllm(tmp_path_factory: pytest.TempPathFactory, upstream_pinned: UpstreamFile) -> tuple[Path, str]:
    path = build_vllm_repo(
        tmp_path_factory.mktemp("vllm") / "vllm",
        [(upstream_pinned.tag, upstream_pinned.data)],
        then=_moved_on(upstream_pinned),
    )
    import git

    return path, git.Repo(path).commit("refs/heads/main").hexsha


def test_the_project_keeps_a_module_for_main_verified_beside_the_pins(
    project: Path, vllm: tuple[Path, str], upstream_pinned: UpstreamFile
) -> None:
    path, sha = vllm
    (project / MAIN_VERIFIED_FILE).write_text(f"{sha}\n")
    result = run(project, "regen", "--main-verified", "--vllm-repo", str(path))
    assert result.exit_code == 0, result.output
    module = (project / "generated/balance_scheduler_main_verified.py").read_text()
    assert f"# upstream tag:    {sha[:12]}" in module and CHANGED in module
    verify.verify(module, _moved_on(upstream_pinned).decode())  # upstream's main plus exactly the deltas
    assert (project / "generated/balance_scheduler.py").read_bytes() == (
        Path(__file__).parents[2] / "generated/balance_scheduler.py"
    ).read_bytes()  # the pin's module is untouched
    assert run(project, "check", "--main-verified", "--vllm-repo", str(path)).exit_code == 0
    edited = module.replace(CHANGED, MAIN_STATEMENT)
    (project / "generated/balance_scheduler_main_verified.py").write_text(edited)
    assert run(project, "check", "--main-verified", "--vllm-repo", str(path)).exit_code == 1


def test_a_tree_learns_which_statements_of_main_verified_its_copies_lack(
    tmp_path: Path, vllm: tuple[Path, str], upstream_pinned: UpstreamFile
) -> None:
    path, sha = vllm
    cache.store(upstream_pinned.tag, upstream_pinned.data)
    tree = consumer_tree.write(tmp_path / "tree", upstream_pinned.text, upstream_pinned.tag)
    (tree / MAIN_VERIFIED_FILE).write_text(f"{sha}\n")
    result = run(tree, "check", "--main-verified", "--vllm-repo", str(path))
    assert result.exit_code == 0, result.output
    assert f"differs from main-verified {sha[:12]}" in result.output
    assert "1 statements" in result.output and "token_budget" in result.output
    # The statement it names is the one main changed.
    (named,) = [line for line in result.output.splitlines() if "token_budget" in line]
    assert "self.max_num_scheduled_tokens - 0" in named

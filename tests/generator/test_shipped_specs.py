"""The specs the tool ships hold from their ``since`` to the newest vLLM release, on vllm-ascend's real tree.

The sweep is what the daily bump workflow's plan runs at each new tag (a failing spec is an issue); a
release that breaks a shipped spec fails this test too. On the published 0.30.0rc2 tree (its sdist from
the index, cached), after ``regen``: each bump through the releases regenerates every copy, or stops
where a spec says it is written up to (a maintainer's decision, with why), writing nothing; and the
tree's own fix path, ``specs export``, lets its maintainer take that decision and bump.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from balance_dev import downstream
from generator.cli import main
from generator.sources.releases import released_tags
from generator.sources.resolve import fetch_upstream
from generator.tags import tag_key
from generator.tree import specs

VERSION = "0.30.0rc2"
DYNTRA = Path("vllm_ascend/core/dyntra_lb_scheduler.py")
RECOMPUTE = Path("vllm_ascend/core/recompute_scheduler.py")
BALANCE = Path("vllm_ascend/patch/platform/patch_balance_schedule.py")
ENCODER_CACHE = "encoder-cache metadata only where SchedulerOutput has the field"
CONNECTOR = "the connector lookup of the running vLLM (v0.26: in the scheduler)"


def _run(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--root", str(root), *args])
    return result.exit_code, result.stdout, result.stderr


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vllm-ascend 0.30.0rc2's tree after ``regen``: what a maintainer bumps from."""
    sdist = downstream.sdist_bytes(VERSION)
    tree = downstream.extract_tree(sdist, tmp_path_factory.mktemp("ascend"), VERSION)
    code, _, err = _run(tree, "regen")
    assert code == 0, err
    return tree


def _copy_of(tree: Path, dest: Path) -> Path:
    shutil.copytree(tree, dest, symlinks=True)
    return dest


def _method(text: str, cls: str) -> ast.FunctionDef:
    (klass,) = [n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == cls]
    (method,) = [n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == "schedule"]
    return method


@pytest.mark.network
def test_every_shipped_spec_applies_from_its_since_to_the_newest_release() -> None:
    shipped = specs.shipped()
    assert {s.name for _, s in shipped} >= {"recompute", "dyntra_lb"}
    since = min((s.since for _, s in shipped if s.since), key=tag_key)
    tags = released_tags(since)
    assert "v0.33.0" in tags
    for tag in tags:
        for row in specs.sweeps(fetch_upstream(tag)):
            spec = next(s for _, s in shipped if s.name == row.spec)
            stops = [e for e in spec.edits if e.until is not None and tag_key(tag) > tag_key(e.until)]
            # Only an edit's own declaration stops it; anything else must apply.
            assert row.outcome == (specs.STOPS if stops else specs.APPLIES), row.line
            if stops:
                assert f"edit {stops[0].name!r}" in row.line and stops[0].why in row.line


@pytest.mark.network
@pytest.mark.parametrize("tag", ["v0.31.0", "v0.32.0"])
def test_a_bump_regenerates_every_copy_for_the_tag(regenerated: Path, tmp_path: Path, tag: str) -> None:
    tree = _copy_of(regenerated, tmp_path / "tree")
    code, out, err = _run(tree, "bump", tag, "--no-impact")
    assert code == 0, err
    assert f"pinned {tag} and regenerated" in out
    assert (tree / ".github/vllm-release-tag.commit").read_text() == f"{tag}\n"
    code, _, err = _run(tree, "check")
    assert code == 0, err
    upstream = fetch_upstream(tag).text
    skip = "skip_request(request_queue)" in upstream  # v0.31+: how upstream skips a waiting request
    for path, cls in ((RECOMPUTE, "RecomputeScheduler"), (DYNTRA, "DyntraLBScheduler")):
        text = (tree / path).read_text()
        assert f"# >>> balance-patchgen: {cls}.schedule is vLLM {tag}'s Scheduler.schedule" in text
        admission = [
            n
            for n in ast.walk(_method(text, cls))
            if isinstance(n, ast.If) and ast.unparse(n.test) == "not self._can_admit_waiting_request(request)"
        ]
        assert len(admission) == 1, path
        # The plan's refusal skips the request the way upstream skips one at this release, no other way.
        assert ("skip_request(request_queue)" in ast.unparse(admission[0])) == skip, path
        assert "step_skipped_waiting.prepend_request" not in ast.unparse(admission[0]) or not skip


@pytest.mark.network
def test_a_bump_past_a_declared_stop_refuses_with_why_and_writes_nothing(regenerated: Path, tmp_path: Path) -> None:
    tree = _copy_of(regenerated, tmp_path / "tree")
    before = _files(tree)
    code, _, err = _run(tree, "bump", "v0.33.0", "--no-impact")
    assert code == 4
    (first,) = [line for line in err.splitlines() if line.startswith("balance-patchgen: error: ")]
    assert f"spec 'dyntra_lb' edit {CONNECTOR!r} is written for vLLM up to v0.32.0, not v0.33.0" in first
    assert "max_cache_hit_length" in first and "`balance-patchgen --root . specs export`" in first
    assert _files(tree) == before
    newest = released_tags("v0.33.0")[-1]
    latest = _run(tree, "bump", "--latest", "--no-impact")
    if newest == "v0.33.0":
        assert latest[0] == 4 and first in latest[2].splitlines()
    assert _files(tree) == before


@pytest.mark.network
def test_the_tree_takes_the_decision_in_its_own_copy_of_the_specs(regenerated: Path, tmp_path: Path) -> None:
    tree = _copy_of(regenerated, tmp_path / "tree")
    code, out, err = _run(tree, "specs", "export")
    assert code == 0, err
    spec = tree / "balance-patchgen.toml"
    assert "wins over the built-in specs now" in out
    assert spec.read_text().endswith(specs.built_in()["vllm-ascend.toml"])
    assert _run(tree, "specs", "export")[0] == 2  # it is the tree's now: not overwritten
    code, _, err = _run(tree, "check")
    assert code == 0, err  # the same specs, read from the tree: the same copies
    # The maintainer's decision: the no-connector branch passes upstream's arguments (the cap among them).
    text = spec.read_text()
    start = text.index(f'name = "{CONNECTOR}"')
    block = text[start : text.index("[[copy.edit]]", start)]
    decided = re.sub(r'until = "v0\.32\.0"\nwhy = """.*?"""\n', "", block, flags=re.S)
    decided = decided.replace(
        "    self._get_local_prefix_cache_hit(request)\n)", "    self._get_local_prefix_cache_hit(*ARGS)\n)"
    ).replace(") = self._get_local_prefix_cache_hit(request)\n", ") = self._get_local_prefix_cache_hit(*ARGS)\n")
    assert decided.count("*ARGS") == 2
    spec.write_text(text.replace(block, decided))
    code, out, err = _run(tree, "bump", "v0.33.0", "--no-impact")
    assert code == 0, err
    dyntra = (tree / DYNTRA).read_text()
    assert "self._get_local_prefix_cache_hit(request, max_cache_hit_length)" in dyntra
    assert _run(tree, "check")[0] == 0
    # On to v0.34.0, where the cap check became the `loads_only` mode. The bump stops at the encoder-cache
    # edit, declared up to v0.33.0: upstream passes no ec_manager_metadata any more. The maintainer drops it.
    before = _files(tree)
    code, _, err = _run(tree, "bump", "v0.34.0", "--no-impact")
    assert code == 4 and f"edit {ENCODER_CACHE!r} is written for vLLM up to v0.33.0, not v0.34.0" in err
    assert _files(tree) == before
    text = spec.read_text()
    start = text.index(f'name = "{ENCODER_CACHE}"')
    start = text.rindex("[[copy.edit]]", 0, start)
    spec.write_text(text[:start] + text[text.index("[[copy.edit]]", start + 1) :])
    code, out, err = _run(tree, "bump", "v0.34.0", "--no-impact")
    assert code == 0, err
    assert "ec_manager_metadata" not in (tree / DYNTRA).read_text().split("# >>> balance-patchgen")[1]
    assert _run(tree, "check")[0] == 0
    assert (tree / ".github/vllm-release-tag.commit").read_text() == "v0.34.0\n"
    for path, cls in ((RECOMPUTE, "RecomputeScheduler"), (DYNTRA, "DyntraLBScheduler")):
        assert f"{cls}.schedule is vLLM v0.34.0's Scheduler.schedule" in (tree / path).read_text(), path
    balance = _method((tree / BALANCE).read_text(), "BalanceScheduler")
    gates = [
        (block, i)
        for node in ast.walk(balance)
        for block in [getattr(node, "body", None)]
        if isinstance(block, list)
        for i, stmt in enumerate(block)
        if isinstance(stmt, ast.If) and [ast.unparse(s) for s in stmt.body] == ["loads_only = True"]
    ]
    assert len(gates) == 1
    block, at = gates[0]
    assert ast.unparse(block[at - 1]).startswith("loads_only = num_running >= self.max_num_active_reqs or")
    assert ast.unparse(block[at].test).endswith(">= self.max_num_active_reqs")  # type: ignore[attr-defined]

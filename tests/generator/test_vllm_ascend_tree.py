"""vllm-ascend's real source tree, as it is published (its sdist on the package index, cached), adopted.

Nothing of vllm-ascend's is kept in this repository: the tree is fetched at test time. Each result is
judged by what it must be, not by the generator's own output: the balance copy minus the three deltas
(a stripper written here) is upstream's v0.30.0 ``schedule()``, the only line outside the copies that
changes is the gathered count, and every copy is a marked region while the rest of each file is theirs.
"""

from __future__ import annotations

import ast
import difflib
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from balance_dev import downstream
from generator.cli import main
from generator.sources import release

VERSION = "0.30.0rc2"  # pinned to vLLM v0.30.0
PATCH = Path("vllm_ascend/patch/platform/patch_balance_schedule.py")
RECOMPUTE = Path("vllm_ascend/core/recompute_scheduler.py")


@pytest.fixture(scope="module")
def sdist() -> bytes:
    # The user's cache (not the per-test one): 21 MB are read from the index once per machine.
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BALANCE_PATCHGEN_CACHE", str(Path(base) / "balance-patchgen"))
        return downstream.sdist_bytes(VERSION)


def _strip(func: ast.FunctionDef) -> list[ast.stmt]:
    class Strip(ast.NodeTransformer):
        def visit_If(self, node: ast.If) -> ast.AST | None:
            test = ast.unparse(node.test)
            if "_balance_enabled" in test or "balance_queue" in test:
                return None
            if test == "request_queue is None":
                return ast.parse("assert request_queue is not None").body[0]
            return self.generic_visit(node)

    return Strip().visit(func).body  # type: ignore[no-any-return]


def _method(text: str, cls: str) -> ast.FunctionDef:
    (klass,) = [n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == cls]
    (func,) = [n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == "schedule"]
    return func


@pytest.mark.network
def test_vllm_ascend_0_30_0rc2_adopts_its_copies_and_keeps_the_rest(sdist: bytes, tmp_path: Path) -> None:
    tree = downstream.extract_tree(sdist, tmp_path / "tree", VERSION)
    before = {p: (tree / p).read_text() for p in (PATCH, RECOMPUTE)}
    runner = CliRunner()
    result = runner.invoke(main, ["--root", str(tree), "regen"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    upstream = release.fetch("v0.30.0")[0]

    patch = (tree / PATCH).read_text()
    assert ast.dump(ast.Module(_strip(_method(patch, "BalanceScheduler")), [])) == ast.dump(
        ast.Module(_method(upstream.text, "Scheduler").body, [])
    )
    changed = [
        line
        for line in difflib.unified_diff(before[PATCH].splitlines(), patch.splitlines(), n=0, lineterm="")
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    outside = [line for line in changed if not _inside_region(line, patch, before[PATCH])]
    assert outside == [
        '-        running_tensor = torch.tensor([len(self.running)], dtype=torch.int, device="cpu")',
        "+        running_tensor = torch.tensor([len(self.running) + self.num_waiting_for_streaming_input], "
        'dtype=torch.int, device="cpu")',
    ]
    recompute = (tree / RECOMPUTE).read_text()
    assert "RecomputeScheduler.schedule is vLLM v0.30.0's Scheduler.schedule" in recompute
    for check in (["check"], ["verify"]):
        again = runner.invoke(main, ["--root", str(tree), *check], catch_exceptions=False)
        assert again.exit_code == 0, again.output


def _inside_region(line: str, new: str, old: str) -> bool:
    """A changed line belongs to the copy when it is in the new region or in the old method's lines."""
    body = line[1:]
    new_lines = new.splitlines()
    start = next(i for i, x in enumerate(new_lines) if "# >>> balance-patchgen: BalanceScheduler" in x)
    end = next(i for i, x in enumerate(new_lines) if "# <<< balance-patchgen: end of BalanceScheduler" in x)
    if line.startswith("+"):
        return body in new_lines[start : end + 1]
    func = _method(old, "BalanceScheduler")
    return body in old.splitlines()[func.lineno - 1 : func.end_lineno]

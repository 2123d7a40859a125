"""vllm-ascend's real source tree, as it is published (its sdist on the package index, cached), adopted.

Nothing of vllm-ascend's is kept in this repository: the tree is fetched at test time. Each result is
judged by what it must be, not by the generator's own output: the balance copy minus the three deltas
(a stripper written here) is upstream's v0.30.0 ``schedule()``, and so is DyntraLB's copy with its eight
edits undone (another one), the only line outside the copies that changes is the gathered count, and
every copy is a marked region while the rest of each file is theirs.
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
DYNTRA = Path("vllm_ascend/core/dyntra_lb_scheduler.py")


def _sdist(version: str) -> bytes:
    # The user's cache (not the per-test one): ~20 MB are read from the index once per machine.
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BALANCE_PATCHGEN_CACHE", str(Path(base) / "balance-patchgen"))
        return downstream.sdist_bytes(version)


@pytest.fixture(scope="module")
def sdist() -> bytes:
    return _sdist(VERSION)


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


class _UndoDyntra(ast.NodeTransformer):
    """DyntraLB's edits (generator/tree/layouts/vllm-ascend.toml) undone, each by what it must have done."""

    def __init__(self) -> None:
        self.output_kwargs: list[ast.keyword] = []
        self.metadata: ast.expr | None = None

    def visit_Expr(self, node: ast.Expr) -> ast.AST | None:
        code = ast.unparse(node)
        if code == "self._apply_load_balance_modifications()":
            return None
        if code == "self._record_prefix_cache_stats(request, num_new_local_computed_tokens)":
            return ast.parse(
                "self.kv_cache_manager.record_prefix_cache_stats(request, num_new_local_computed_tokens)"
            ).body[0]
        return node

    def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt] | None:
        test = ast.unparse(node.test)
        if test in ("not self._can_admit_waiting_request(request)", "self._enable_diagnostics"):
            return None
        if test == "self.connector is not None" and "self._get_connector_computed_blocks(request)" in ast.unparse(
            node.body[0]
        ):
            return node.orelse  # upstream's own lookup, which the edit kept for a tree without a connector
        if test == "self._scheduler_output_supports('ec_manager_metadata')":
            (assign,) = node.body
            assert isinstance(assign, ast.Assign)
            self.metadata = assign.value
            return None
        return self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        if ast.unparse(node.test) == "supports_partial_tail":
            return self.visit(node.body)
        return self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        first = ast.unparse(node.values[0])
        if first == "self.num_spec_tokens > 0 and self.dynamic_sd_lookup is None" and len(node.values) == 4:
            node.values.append(ast.parse("scheduled_running_reqs or num_computed_tokens > 0", mode="eval").body)
        return self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST | None:
        code = ast.unparse(node)
        if code.startswith("scheduler_output_kwargs = dict("):
            assert isinstance(node.value, ast.Call)
            self.output_kwargs = node.value.keywords
            return None
        if code == "scheduler_output = SchedulerOutput(**scheduler_output_kwargs)":
            assert self.metadata is not None
            call = ast.parse("scheduler_output = SchedulerOutput()").body[0]
            assert isinstance(call, ast.Assign) and isinstance(call.value, ast.Call)
            call.value.keywords = [*self.output_kwargs, ast.keyword("ec_manager_metadata", self.metadata)]
            return call
        return self.generic_visit(node)


def _without_dyntra_edits(func: ast.FunctionDef) -> list[ast.stmt]:
    return _UndoDyntra().visit(func).body


def _outside_region(text: str, cls: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if f"# >>> balance-patchgen: {cls}." in x)
    end = next(i for i, x in enumerate(lines) if f"# <<< balance-patchgen: end of {cls}." in x)
    return [*lines[:start], *lines[end + 1 :]]


def _outside_method(text: str, cls: str) -> list[str]:
    func = _method(text, cls)
    lines = text.splitlines()
    return [*lines[: func.lineno - 1], *lines[func.end_lineno or func.lineno :]]


def _method(text: str, cls: str) -> ast.FunctionDef:
    (klass,) = [n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == cls]
    (func,) = [n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == "schedule"]
    return func


@pytest.mark.network
def test_vllm_ascend_0_30_0rc2_adopts_its_copies_and_keeps_the_rest(sdist: bytes, tmp_path: Path) -> None:
    tree = downstream.extract_tree(sdist, tmp_path / "tree", VERSION)
    before = {p: (tree / p).read_text() for p in (PATCH, RECOMPUTE, DYNTRA)}
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
    dyntra = (tree / DYNTRA).read_text()
    assert "DyntraLBScheduler.schedule is vLLM v0.30.0's Scheduler.schedule" in dyntra
    assert ast.dump(ast.Module(_without_dyntra_edits(_method(dyntra, "DyntraLBScheduler")), [])) == ast.dump(
        ast.Module(_method(upstream.text, "Scheduler").body, [])
    )
    assert _outside_region(dyntra, "DyntraLBScheduler") == _outside_method(before[DYNTRA], "DyntraLBScheduler")
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


@pytest.mark.network
def test_vllm_ascend_0_27_1rc1_keeps_its_dyntra_lb_copy_written_for_an_older_pin(tmp_path: Path) -> None:
    """DyntraLB's spec is written for v0.30.0 on (since): a tree pinned to v0.27.1 keeps its copy byte for byte."""
    tree = downstream.extract_tree(_sdist("0.27.1rc1"), tmp_path / "tree", "0.27.1rc1")
    before = (tree / DYNTRA).read_text()
    runner = CliRunner()
    result = runner.invoke(main, ["--root", str(tree), "regen"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (tree / DYNTRA).read_text() == before
    assert "DyntraLBScheduler.schedule is kept as it is: its spec 'dyntra_lb' is written for vLLM v0.30.0 on" in (
        result.output
    )
    again = runner.invoke(main, ["--root", str(tree), "check"], catch_exceptions=False)
    assert again.exit_code == 0, again.output

"""Guards on the upstream surfaces the runtime relies on, and how the patch installs itself."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import vllm.v1.core.sched.scheduler as sched_mod
import vllm.v1.engine.core as engine_mod

from balance_dev.vllm_objects import balance_config, make_vllm_config
from vllm_ascend.core.balance_scheduler_base import BalanceSchedulerBase

GENERATED = Path(__file__).resolve().parents[2] / "generated" / "balance_scheduler.py"


def test_schedule_and_init_signatures_equal_upstreams(patch_mod: Any, upstream_scheduler_cls: type) -> None:
    assert inspect.signature(patch_mod.BalanceScheduler.schedule) == inspect.signature(upstream_scheduler_cls.schedule)
    assert inspect.signature(BalanceSchedulerBase.__init__) == inspect.signature(upstream_scheduler_cls.__init__)


def test_scheduler_methods_the_copied_body_calls_still_exist(upstream_scheduler_cls: type) -> None:
    tree = ast.parse(GENERATED.read_text())
    called = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
    }
    assert "_update_after_schedule" in called
    missing = sorted(name for name in called if not hasattr(upstream_scheduler_cls, name))
    assert missing == []


def test_upstream_run_engine_core_constructs_dp_engine_by_global_name(patch_mod: Any) -> None:
    original = engine_mod._balance_original_run_engine_core
    tree = ast.parse(textwrap.dedent(inspect.getsource(original)))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    assert "DPEngineCoreProc" in {c.func.id for c in calls}  # type: ignore[union-attr]


def test_gather_hook_point_still_exists(patch_mod: Any) -> None:
    original = engine_mod._balance_original_dp_engine_core_proc
    assert "_has_global_unfinished_reqs" in vars(original)
    assert list(inspect.signature(original._has_global_unfinished_reqs).parameters) == ["self", "local_unfinished"]
    # And the busy loop is what calls it, once per non-idle iteration.
    # Read from the class's source: 0.27+ wraps the loop in a fault-tolerance decorator.
    tree = ast.parse(textwrap.dedent(inspect.getsource(original)))
    (loop,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "run_busy_loop"]
    calls = [
        n
        for w in ast.walk(loop)
        if isinstance(w, ast.While)
        for n in ast.walk(w)
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "self._has_global_unfinished_reqs"
    ]
    assert len(calls) == 1


def test_after_import_scheduler_is_rebound_but_dp_engine_is_not_swapped(patch_mod: Any) -> None:
    assert sched_mod.Scheduler is patch_mod.BalanceScheduler
    assert engine_mod.DPEngineCoreProc is engine_mod._balance_original_dp_engine_core_proc
    assert engine_mod.EngineCoreProc.run_engine_core is patch_mod._balance_run_engine_core


def test_importing_again_does_not_double_wrap(patch_mod: Any) -> None:
    original = engine_mod._balance_original_run_engine_core
    reloaded = importlib.reload(patch_mod)
    assert engine_mod._balance_original_run_engine_core is original
    assert reloaded._OriginalRunEngineCore is original
    assert engine_mod.EngineCoreProc.run_engine_core is reloaded._balance_run_engine_core
    assert reloaded.BalanceDPEngineCoreProc.__mro__[1] is engine_mod._balance_original_dp_engine_core_proc
    # The start-up agreement wraps upstream's _init_data_parallel once, on upstream's own class.
    dp_engine = engine_mod._balance_original_dp_engine_core_proc
    assert reloaded._OriginalInitDataParallel is engine_mod._balance_original_init_data_parallel
    assert dp_engine._init_data_parallel is reloaded._balance_init_data_parallel
    assert dp_engine._init_data_parallel.__wrapped__ is engine_mod._balance_original_init_data_parallel


def test_upstream_forms_the_dp_group_with_its_store_before_it_builds_the_engine(patch_mod: Any) -> None:
    """The agreement reads ``self.dp_store`` after upstream's ``_init_data_parallel``; a refusal there comes
    before the model loads (``EngineCoreProc.__init__`` forms the group before ``EngineCore.__init__``)."""
    source = textwrap.dedent(inspect.getsource(engine_mod._balance_original_init_data_parallel))
    assert "stateless_init_dp_group(return_store=True)" in source and "self.dp_store" in source
    init = ast.parse(textwrap.dedent(inspect.getsource(engine_mod.EngineCoreProc.__init__)))
    calls = [ast.unparse(n.func) for n in ast.walk(init) if isinstance(n, ast.Call)]
    assert calls.index("self._init_data_parallel") < calls.index("super().__init__")


def test_balance_scheduler_is_importable_from_the_patch_module_path() -> None:
    from vllm_ascend.patch.platform.patch_balance_schedule import BalanceScheduler

    assert issubclass(BalanceScheduler, BalanceSchedulerBase)


@pytest.mark.parametrize("enabled", [True, False])
def test_run_engine_core_swaps_only_when_enabled(patch_mod: Any, enabled: bool) -> None:
    # The real upstream run_engine_core runs; it fails when it tries to build the engine (no
    # executor, no handshake), which is after the wrapper chose the class.
    patch = importlib.import_module(patch_mod.__name__)
    config = make_vllm_config(additional_config=balance_config(enabled), data_parallel_size=2, moe=True)
    assert config.model_config.is_moe
    # Whatever upstream raises without a real engine; only not the wrapper's own refusal.
    with pytest.raises(Exception) as info:
        engine_mod.EngineCoreProc.run_engine_core(vllm_config=config, dp_rank=0, local_dp_rank=0)
    assert not isinstance(info.value, patch.BalanceNotActiveError)
    expected = patch.BalanceDPEngineCoreProc if enabled else engine_mod._balance_original_dp_engine_core_proc
    assert engine_mod.DPEngineCoreProc is expected
    engine_mod.DPEngineCoreProc = engine_mod._balance_original_dp_engine_core_proc


@pytest.mark.parametrize(("dp", "moe"), [(1, True), (2, False)], ids=["dp1", "dense"])
def test_balance_on_without_the_dp_engine_core_fails_at_start_up(patch_mod: Any, dp: int, moe: bool) -> None:
    config = make_vllm_config(additional_config=balance_config(True), data_parallel_size=dp, moe=moe)
    with pytest.raises(patch_mod.BalanceNotActiveError, match="DP engine core only for data_parallel_size > 1"):
        engine_mod.EngineCoreProc.run_engine_core(vllm_config=config, dp_rank=0, local_dp_rank=0)


def test_upstream_builds_the_dp_engine_core_under_the_condition_the_wrapper_mirrors(patch_mod: Any) -> None:
    source = textwrap.dedent(inspect.getsource(engine_mod._balance_original_run_engine_core))
    assert "data_parallel = parallel_config.data_parallel_size > 1 or dp_rank > 0" in source
    assert "if data_parallel and vllm_config.model_config.is_moe:" in source


def test_balance_engine_core_refuses_a_scheduler_that_is_not_balance(
    patch_mod: Any, upstream_scheduler_cls: type
) -> None:
    from balance_dev.vllm_objects import make_scheduler

    engine = object.__new__(patch_mod.BalanceDPEngineCoreProc)
    engine.dp_rank = 0
    engine.scheduler = make_scheduler(upstream_scheduler_cls, make_vllm_config(additional_config=balance_config(True)))
    with pytest.raises(patch_mod.BalanceNotActiveError, match="not a balance scheduler"):
        engine._check_balance_active()
    engine.scheduler = make_scheduler(
        patch_mod.BalanceScheduler, make_vllm_config(additional_config=balance_config(True))
    )
    engine._check_balance_active()


def test_async_scheduling_gets_the_balance_scheduler(patch_mod: Any) -> None:
    config = make_vllm_config(additional_config=balance_config(True))
    config.scheduler_config.async_scheduling = True
    chosen = config.scheduler_config.get_scheduler_cls()
    assert chosen is patch_mod.BalanceAsyncScheduler
    assert issubclass(chosen, patch_mod.BalanceScheduler)
    assert issubclass(chosen, sys.modules["vllm.v1.core.sched.async_scheduler"]._balance_original_async_scheduler)


def test_vllm_plugin_loader_installs_the_patch_in_a_fresh_process() -> None:
    code = (
        "import vllm.v1.core.sched.scheduler as s, vllm.v1.engine.core as c\n"
        "assert s.Scheduler.__name__ == 'Scheduler', 'patched before the plugin loader ran'\n"
        "from vllm.plugins import load_general_plugins\n"
        "load_general_plugins()\n"
        "import vllm.v1.engine.utils as u\n"
        "print(s.Scheduler.__module__, s.Scheduler.__name__, c.EngineCoreProc.run_engine_core.__name__,\n"
        "      u.CoreEngineActorManager.__init__.__code__.co_name)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-4:] == [
        "vllm_ascend.patch.platform.patch_balance_schedule",
        "BalanceScheduler",
        "_balance_run_engine_core",
        "_balance_actor_manager_init",  # Ray's engine-core actor is chosen there
    ]


def test_every_attribute_the_copied_body_reads_exists_on_a_real_scheduler(patch_mod: Any) -> None:
    from balance_dev.vllm_objects import make_scheduler

    tree = ast.parse(GENERATED.read_text())
    schedule = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "schedule")
    read = {
        node.attr
        for node in ast.walk(schedule)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and isinstance(node.ctx, ast.Load)
    }
    assert {"running", "waiting", "balance_leader_running", "_balance_enabled"} <= read
    instance = make_scheduler(patch_mod.BalanceScheduler, make_vllm_config(additional_config=balance_config(True)))
    assert sorted(a for a in read if not hasattr(instance, a)) == []


@pytest.mark.parametrize("method", ["__init__", "scale_up_elastic_ep"])
def test_ray_manager_reads_the_dp_moe_actor_by_name_when_it_runs(patch_mod: Any, method: str) -> None:
    # The swap works only because upstream imports the class inside the method, at call time.
    import vllm.v1.engine.utils as utils_mod

    original = getattr(utils_mod, f"_balance_original_{'actor_manager_init' if method == '__init__' else method}")
    tree = ast.parse(textwrap.dedent(inspect.getsource(original)))
    imports = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "vllm.v1.engine.core"
        for alias in node.names
    ]
    assert "DPMoEEngineCoreActor" in imports


def test_ray_manager_builds_the_dp_moe_actor_under_the_condition_the_wrapper_mirrors(patch_mod: Any) -> None:
    import vllm.v1.engine.utils as utils_mod

    source = " ".join(inspect.getsource(utils_mod._balance_original_actor_manager_init).split())
    assert "DPMoEEngineCoreActor if dp_size > 1 and vllm_config.model_config.is_moe else EngineCoreActor" in source


def test_the_ray_actor_carries_the_gather_hook_over_upstreams_actor(patch_mod: Any) -> None:
    actor = patch_mod.BalanceDPMoEEngineCoreActor
    upstream_actor = engine_mod._balance_original_dp_moe_actor
    assert issubclass(actor, upstream_actor) and issubclass(actor, patch_mod.BalanceDPEngineCoreProc)
    # Upstream's actor methods first (Ray's handshake, run()), then the hook, then upstream's engine core.
    mro = actor.__mro__
    assert (
        mro.index(upstream_actor)
        < mro.index(patch_mod.BalanceDPEngineCoreProc)
        < mro.index(engine_mod._balance_original_dp_engine_core_proc)
    )
    assert actor._has_global_unfinished_reqs is patch_mod.BalanceDPEngineCoreProc._has_global_unfinished_reqs
    # After import, upstream's actor is what vLLM sees until a manager runs with balance on.
    assert engine_mod.DPMoEEngineCoreActor is upstream_actor


@pytest.mark.parametrize("enabled", [True, False])
def test_ray_manager_picks_the_balance_actor_only_when_enabled(patch_mod: Any, enabled: bool) -> None:
    # The real upstream manager runs after the wrapper chose; without a Ray cluster (or ray) it fails.
    import vllm.v1.engine.utils as utils_mod

    config = make_vllm_config(additional_config=balance_config(enabled), data_parallel_size=2, moe=True)
    with pytest.raises(Exception) as info:
        utils_mod.CoreEngineActorManager(vllm_config=config, addresses=None, executor_class=None, log_stats=False)
    assert not isinstance(info.value, patch_mod.BalanceNotActiveError)
    expected = patch_mod.BalanceDPMoEEngineCoreActor if enabled else engine_mod._balance_original_dp_moe_actor
    assert engine_mod.DPMoEEngineCoreActor is expected
    engine_mod.DPMoEEngineCoreActor = engine_mod._balance_original_dp_moe_actor


@pytest.mark.parametrize(("dp", "moe"), [(1, True), (2, False)], ids=["dp1", "dense"])
def test_balance_on_with_ray_and_no_dp_engine_core_fails_at_start_up(patch_mod: Any, dp: int, moe: bool) -> None:
    import vllm.v1.engine.utils as utils_mod

    config = make_vllm_config(additional_config=balance_config(True), data_parallel_size=dp, moe=moe)
    with pytest.raises(patch_mod.BalanceNotActiveError, match="DP engine core only for data_parallel_size > 1"):
        utils_mod.CoreEngineActorManager(vllm_config=config, addresses=None, executor_class=None, log_stats=False)

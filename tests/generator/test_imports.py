"""Free names of the generated class resolved against upstream's module bindings."""

from __future__ import annotations

import ast
import textwrap

import pytest

from generator.builder import extract, imports
from generator.errors import UpstreamShapeError
from generator.sources.base import UpstreamFile

UPSTREAM = textwrap.dedent(
    """\
    import time
    import os.path
    import numpy as np
    from typing import TYPE_CHECKING
    from collections import deque as dq
    from .output import SchedulerOutput
    from ..kv import Blocks

    if TYPE_CHECKING:
        from vllm.config import VllmConfig

    try:
        from fast import thing
    except ImportError:
        from slow import thing

    logger = make_logger()

    def helper():
        pass
    """
)

CLASS = textwrap.dedent(
    """\
    class BalanceScheduler(BalanceSchedulerBase):
        def schedule(self, config: "VllmConfig") -> SchedulerOutput:
            local = time.monotonic()
            p = os.path.join("a", "b")
            q = [np.zeros(i) for i in range(local)]
            d = dq()
            helper()
            logger.info("%s", Blocks)
            thing()
            return len(q)
    """
)


def _resolve(class_code: str = CLASS):  # type: ignore[no-untyped-def]
    names = imports.free_names(class_code) - {"BalanceSchedulerBase"}
    return names, imports.resolve(
        names, imports.module_bindings(ast.parse(UPSTREAM), "pkg.sub.sched"), tag="vX", module_name="pkg.sub.sched"
    )


def test_free_names_exclude_locals_params_and_comprehension_variables() -> None:
    names, _ = _resolve()
    assert {"time", "os", "np", "dq", "helper", "logger", "Blocks", "thing", "SchedulerOutput"} <= names
    assert not {"local", "p", "q", "i", "d", "self", "config"} & names


def test_each_binding_kind_becomes_the_right_absolute_import() -> None:
    _, block = _resolve()
    stdlib, third_party = block.runtime
    assert stdlib == ["import os.path", "import time", "from collections import deque as dq"]
    assert third_party == [
        "import numpy as np",
        "from pkg.kv import Blocks",  # `from ..kv` made absolute
        "from pkg.sub.output import SchedulerOutput",  # `from .output` made absolute
        # module-level def, assignment, and a name bound twice (try/except) come from the module
        "from pkg.sub.sched import helper, logger, thing",
    ]


def test_type_checking_import_stays_under_type_checking() -> None:
    code = CLASS.replace('config: "VllmConfig"', "config: VllmConfig")
    _, block = _resolve(code)
    assert block.type_checking == ["from vllm.config import VllmConfig"]
    assert all("VllmConfig" not in line for group in block.runtime for line in group)


def test_builtins_need_no_import_and_unresolvable_names_are_an_error() -> None:
    names, block = _resolve()
    assert "len" in names and "range" in names
    assert all("len" not in line for group in block.runtime for line in group)
    with pytest.raises(UpstreamShapeError, match="'mystery'"):
        _resolve(CLASS.replace("thing()", "mystery()"))


def test_long_import_lines_are_wrapped_one_name_a_line() -> None:
    upstream = "from a.very.long.module.path.that.goes.on import " + ", ".join(f"name_{i}" for i in range(8))
    names = {f"name_{i}" for i in range(8)}
    block = imports.resolve(names, imports.module_bindings(ast.parse(upstream)), tag="vX")
    (line,) = block.runtime[0]
    assert line.startswith("from a.very.long.module.path.that.goes.on import (\n    name_0,\n")
    assert line.endswith("    name_7,\n)")


def test_generated_module_imports_against_installed_vllm() -> None:
    # Importing the committed module executes every emitted import line against the real vLLM.
    import vllm_ascend._generated.balance_scheduler as generated

    assert generated.BalanceScheduler.schedule.__module__ == generated.__name__


TOP_LEVEL_SHAPES = textwrap.dedent(
    '''\
    """Docstring first."""
    from __future__ import annotations

    import time

    @decorate
    class Big(Base, metaclass=Meta):
        import hidden  # a class-level import binds nothing at module level

        def method(self):
            global leaked
            leaked = 1

    async def fetch():
        import also_hidden

    if TYPE_CHECKING:
        from vllm.config import VllmConfig

        class OnlyForTypes:
            x: int = 0
    else:
        VllmConfig = None

    try:
        from fast import thing
    except ImportError:
        thing = None
    finally:
        done = True

    a, (b, *c) = d = 1, (2, 3)
    total: int = 0
    for loop_var in range(3):
        pass
    with open("x") as handle:
        pass
    '''
)


def test_top_level_reads_what_the_whole_file_binds(upstream_pinned: UpstreamFile) -> None:
    """The reduced tree binds exactly what a parse of the whole file does, on shapes and on upstream."""
    for source in (TOP_LEVEL_SHAPES, UPSTREAM, upstream_pinned.text):
        reduced = extract.top_level(extract.parse(source, "vX"))
        whole = ast.parse(source)
        assert imports.module_bindings(reduced) == imports.module_bindings(whole)
        assert imports.future_imports(reduced) == imports.future_imports(whole)
    bound = imports.module_bindings(ast.parse(TOP_LEVEL_SHAPES))
    assert {"Big", "fetch", "VllmConfig", "OnlyForTypes", "thing", "done", "a", "b", "c", "d", "total"} <= set(bound)
    assert not {"hidden", "also_hidden", "method"} & set(bound)

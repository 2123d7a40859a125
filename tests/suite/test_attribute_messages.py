"""The attribution rules on Python's own messages: each error line here is made by running Python for real
(a mock of a member a vLLM class lost, a NamedTuple called without its new field, a class of the tree two
classes below a vLLM base that gained an abstract method), never written from the rules' patterns. Which
coupling each must hit is written here by hand."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from balance_dev.suite import outcomes
from generator.judge.explain import attribute, classes, scopes

VLLM = {
    "vllm/__init__.py": "",
    "vllm/registry.py": "class Registry:\n    def kept(self):\n        return 1\n",
    "vllm/state.py": "from typing import NamedTuple\n\n\nclass BatchState(NamedTuple):\n    a: int\n    b: int\n",
    "vllm/spec.py": textwrap.dedent("""\
        import abc


        class Spec(abc.ABC):
            @abc.abstractmethod
            def size(self): ...

            @abc.abstractmethod
            def page_bytes(self): ...
    """),
}
TREE = {
    "plugin/__init__.py": "",
    "plugin/mid.py": "from vllm.spec import Spec\n\n\nclass Mid(Spec):\n    pass\n",
    "plugin/leaf.py": "from plugin.mid import Mid\n\n\nclass Leaf(Mid):\n    def size(self):\n        return 1\n",
    "plugin/state.py": "from vllm.state import BatchState\n\n\ndef make():\n    return BatchState(1)\n",
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def _python_says(tmp: Path, code: str) -> str:
    """The first line Python gives for the exception ``code`` raises, with VLLM and TREE importable."""
    _write(tmp / "site", VLLM)
    _write(tmp / "tree", TREE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = f"{tmp / 'tree'}{os.pathsep}{tmp / 'site'}"
    wrapped = (
        f"try:\n{textwrap.indent(code, '    ')}\nexcept Exception as e:\n    print(f'{{type(e).__name__}}: {{e}}')"
    )
    done = subprocess.run([sys.executable, "-c", wrapped], env=env, capture_output=True, text=True, check=True)
    line = done.stdout.strip().splitlines()[0]
    assert line, done.stderr
    return line


def _coupling(kind: str, site: str, upstream: str, rule: str = "") -> dict[str, object]:
    return {"kind": kind, "site": site, "upstream": upstream, "status": "changed", "verdict": "breaks", "rule": rule}


def _hits(error: str, raw: list[dict[str, object]], test_file: str, bases: attribute.Bases | None = None) -> set[str]:
    site_scopes = {str(c["site"]): scopes.Scope(str(c["site"]).rpartition(":")[0], ((1, 1),)) for c in raw}
    failure = outcomes.Outcome(f"{test_file}::test_x", "failed", error, (outcomes.Frame(test_file, 9, "test_x"),))
    found = attribute.attribute_one(failure, attribute.couplings_of({}, site_scopes, raw), bases)
    return {f"{h.site} {h.upstream} {h.rule}" for h in found.hits}


def test_a_mock_of_a_member_vllm_no_longer_has_names_it(tmp_path: Path) -> None:
    error = _python_says(
        tmp_path,
        "from unittest import mock\nfrom vllm.registry import Registry\nmock.patch.object(Registry, 'gone').start()",
    )
    raw = [
        _coupling("patch", "tests/test_r.py:5", "vllm.registry.Registry.gone"),
        _coupling("import", "tests/test_r.py:1", "vllm.registry.Registry.kept"),
    ]
    assert _hits(error, raw, "tests/test_r.py") == {"tests/test_r.py:5 vllm.registry.Registry.gone name"}


def test_a_namedtuple_called_the_old_way_hits_the_import_b_refuses(tmp_path: Path) -> None:
    error = _python_says(tmp_path, "from plugin.state import make\nmake()")
    assert error.startswith("TypeError: BatchState.__new__() missing")
    raw = [_coupling("import", "plugin/state.py:1", "vllm.state.BatchState", "call-refused")]
    # the call is in plugin/state.py, a frame of the failure's traceback
    found = _hits(error, raw, "plugin/state.py")
    assert found == {"plugin/state.py:1 vllm.state.BatchState call"}
    raw[0]["rule"] = "other"  # B takes the tree's call: the TypeError is not the bump's doing there
    assert _hits(error, raw, "plugin/state.py") == set()


def test_a_class_below_a_class_of_the_tree_hits_the_vllm_base_it_derives_from(tmp_path: Path) -> None:
    error = _python_says(tmp_path, "from plugin.leaf import Leaf\nLeaf()")
    assert error.startswith("TypeError: Can't instantiate abstract class Leaf")
    bases = classes.read(tmp_path / "tree", TREE)
    assert bases["Leaf"] == bases["Mid"] == {("plugin/mid.py", "vllm.spec.Spec")}
    raw = [_coupling("import", "plugin/mid.py:1", "vllm.spec.Spec")]
    assert _hits(error, raw, "tests/test_leaf.py", bases) == {"plugin/mid.py:1 vllm.spec.Spec class"}

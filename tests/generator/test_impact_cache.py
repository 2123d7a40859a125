"""The judgement cache (``couplings/judged.py``) and release A's index read in workers never change a report.

Two small vLLM-shaped releases and a tree are written here, each coupling's fate planted: a function
whose body changes, one that goes, an override whose base starts taking a required parameter, and a
class whose ``__init__`` changes. A run that keeps nothing is the reference; a cold run (which fills the
cache), a warm one (which answers from it), one after a file of the tree changed, and one whose pack
was corrupted on disk must all print the same bytes, and the planted verdicts must be there.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from balance_dev.package_index import wheel_name, wheel_of
from generator.cli import main
from generator.judge.census import index as census_index
from generator.judge.couplings import impact, tree_read
from generator.sources import cache, package

A = {
    "vllm/__init__.py": "",
    "vllm/engine.py": """
        class Engine:
            def __init__(self, config):
                self.config = config

            def step(self, batch):
                return [r for r in batch if r]

        def plan(requests, budget):
            chosen = []
            for request in requests:
                if request.cost <= budget:
                    chosen.append(request)
                    budget -= request.cost
            chosen.sort()
            return chosen

        def retired(x):
            return x + 1
    """,
}
B = {
    "vllm/__init__.py": "",
    "vllm/engine.py": """
        class Engine:
            def __init__(self, config, device="cpu"):
                self.config = config
                self.device = device

            def step(self, batch, budget):
                return [r for r in batch if r][:budget]

        def plan(requests, budget):
            chosen = []
            for request in requests:
                if request.cost < budget:
                    chosen.append(request)
                    budget -= request.cost
            chosen.sort()
            return chosen
    """,
}
TREE = {
    "plug/__init__.py": "",
    "plug/engine.py": """
        from vllm.engine import Engine, plan, retired

        class MyEngine(Engine):
            def step(self, batch):
                return super().step(batch)

        def use(requests):
            return plan(requests, 3), retired(1)
    """,
    "plug/tests/test_engine.py": """
        from unittest import mock

        def test_plan():
            with mock.patch("vllm.engine.plan"):
                pass
    """,
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip())
    return root


@pytest.fixture
def tree(tmp_path: Path, local_index: dict[str, bytes]) -> Path:
    for version, files in (("1.0.0", A), ("1.1.0", B)):
        members = {rel: textwrap.dedent(text).lstrip().encode() for rel, text in files.items()}
        local_index[wheel_name(version)] = wheel_of(version, members)
    return _write(tmp_path / "plugin", TREE)


def _impact(tree: Path, monkeypatch: pytest.MonkeyPatch, *, keep: bool) -> tuple[str, str]:
    if keep:
        monkeypatch.delenv(tree_read.NO_CACHE_ENV, raising=False)
    else:
        monkeypatch.setenv(tree_read.NO_CACHE_ENV, "1")
    args = ["impact", "--root", str(tree), "--from", "v1.0.0", "--to", "v1.1.0", "--format", "json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.stderr
    return result.stdout, result.stderr


def _hits(said: str) -> int:
    """How many answers the run took from the judgement cache, as it says on stderr."""
    (found,) = re.findall(r"(\d+) judgements from the cache", said)
    return int(found)


def _packs() -> list[Path]:
    return sorted((cache.cache_root() / "couplings-judged").glob("*/*.pickle"))


def test_judgements_kept_or_not_give_the_same_report(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reference, said = _impact(tree, monkeypatch, keep=False)
    assert _hits(said) == 0 and not _packs()  # nothing kept when told not to
    report = json.loads(reference)
    verdict = {(c["site"], c["upstream"]): (c["status"], c["rule"]) for c in report["couplings"]}
    assert verdict[("plug/engine.py:1", "vllm.engine.retired")] == ("removed", "gone")
    assert verdict[("plug/engine.py:1", "vllm.engine.plan")] == ("changed", "other")
    assert verdict[("plug/engine.py:4", "vllm.engine.Engine.step")] == ("changed", "override-signature")
    assert verdict[("plug/engine.py:1", "vllm.engine.Engine")] == ("changed", "init-changed")
    assert verdict[("plug/tests/test_engine.py:4", "vllm.engine.plan")] == ("changed", "patched-changed")

    cold, said = _impact(tree, monkeypatch, keep=True)
    assert _hits(said) == 0
    assert len(_packs()) == 1
    warm, said = _impact(tree, monkeypatch, keep=True)
    assert _hits(said) >= 10, said  # every name, override, call and verdict: none judged again
    assert reference == cold == warm

    engine = tree / "plug/engine.py"
    engine.write_text(engine.read_text() + "\nfrom vllm.engine import Engine as Again\n")
    changed, _ = _impact(tree, monkeypatch, keep=True)
    assert changed == _impact(tree, monkeypatch, keep=False)[0] != warm
    added = {c["site"] for c in json.loads(changed)["couplings"] if c["upstream"] == "vllm.engine.Engine"}
    assert added == {"plug/engine.py:1", f"plug/engine.py:{len(engine.read_text().splitlines())}"}

    (pack,) = _packs()
    data = bytearray(pack.read_bytes())
    data[len(data) // 2] ^= 0xFF  # corrupted on disk: its sidecar no longer matches, so it is dropped
    pack.write_bytes(bytes(data))
    again, said = _impact(tree, monkeypatch, keep=True)
    assert again == changed
    assert _hits(said) == 0


def test_release_index_read_in_workers_is_the_index_read_in_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "\n".join(f"    x{i} = n * {i}\n    n += x{i}" for i in range(4))
    files = {"vllm/__init__.py": ""}
    for i in range(40):
        files[f"vllm/m{i:02d}.py"] = f"def f{i % 7}(n):\n{body}\n    return n\n" + ("def broken(:\n" if i == 5 else "")
    root = tmp_path / "src"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)

    def read() -> tuple[list[tuple[str, str, int, tuple[int, ...]]], list[tuple[str, str]], int]:
        index = census_index.UpstreamIndex(census_index.package_source(package.folder(root, "local")))
        found = sorted((f.path, f.qualname, f.line, f.keys) for fs in index.by_name.values() for f in fs)
        return found, [(s.path, s.reason) for s in index.skipped], index.files

    monkeypatch.setattr(census_index, "_PARALLEL_FROM", 10**6)
    alone = read()
    monkeypatch.setattr(census_index, "_PARALLEL_FROM", 1)
    assert read() == alone
    assert len(alone[0]) == 39 and alone[1] == [("vllm/m05.py", "SyntaxError")] and alone[2] == 40


def test_a_kept_definition_reads_its_statement_again(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A definition the cache gave back has no tree of its own: asked for one, it parses the same statement."""
    monkeypatch.delenv(tree_read.NO_CACHE_ENV, raising=False)
    old, new = package.release("v1.0.0"), package.release("v1.1.0")

    kept: list[bool] = []

    def statements() -> dict[str, tuple[str | None, str | None, tuple[int, int] | None]]:
        found = impact.run(tree, old, new)
        step = found.symbols["vllm.engine.Engine.step"].change.new
        kept.append(step is not None and step._load is not None)  # not parsed yet
        return {
            name: (
                ast.dump(c.old.node) if c.old and c.old.node else None,
                ast.dump(c.new.node) if c.new and c.new.node else None,
                c.new.span if c.new else None,
            )
            for name, s in found.symbols.items()
            for c in [s.change]
        }

    cold, warm = statements(), statements()
    assert kept == [False, True]
    assert cold == warm
    step = warm["vllm.engine.Engine.step"]
    assert step[1] is not None and "Name(id='budget'" in step[1] and step[2] == (6, 7)  # B's, where B has it

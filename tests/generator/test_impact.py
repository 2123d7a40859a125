"""couplings and impact on a small vLLM-shaped tree, between two small vLLM-shaped releases written here.

The releases are wheels on a loopback index (member-wise reads, as from the real one). What each
coupling's status must be is decided here, independently of the code under test: this file knows
where it planted each definition, reads it from both releases' files with stdlib ``ast`` (docstrings
aside), and compares. The tool's answers are held to that.
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import git
import jsonschema
import pytest
from click.testing import CliRunner

from balance_dev import plain_ast
from balance_dev.package_index import wheel_name, wheel_of
from balance_dev.project_files import REPO_ROOT
from generator.cli import main
from generator.judge.couplings import tree_read

SCHEMA = json.loads((REPO_ROOT / "generator/judge/couplings/impact.schema.json").read_text())

_SCHEDULE = """
def schedule(self):
    budget = self.budget
    scheduled = []
    while self.waiting:
        request = self.waiting.pop()
        if len(scheduled) >= self.cap:
            break
        scheduled.append(request)
        budget -= request.size
    self.steps += 1
    return scheduled
"""
_PICK = """
def pick(queue, limit):
    chosen = []
    for item in queue:
        if item.ready:
            chosen.append(item)
        if len(chosen) == limit:
            break
    chosen.sort()
    return chosen
"""

A = {
    "vllm/__init__.py": """
        MODULE_ATTRS = {"Engine": ".engine.core:Engine"}

        def __getattr__(name):
            raise AttributeError(name)
    """,
    "vllm/config/__init__.py": "from vllm.config.model import ModelConfig\n",
    "vllm/config/model.py": '''
        class ModelConfig:
            """The model's settings."""

            max_len: int = 16

            def verify(self, quant):
                """Checks the quantization."""
                return quant is not None

            def size(self):
                return self.max_len * 2

            def name(self, short=False):
                return "model"

            @property
            def is_mla(self):
                return False
    ''',
    "vllm/engine/__init__.py": "",
    "vllm/engine/core.py": """
        TIMEOUT = 30


        class Engine:
            pass


        class EngineCore:
            def __init__(self, config):
                self.config = config

            def step(self):
                return self.config

            def abort(self):
                return None


        class DPEngineCoreProc(EngineCore):
            def run_busy_loop(self):
                while True:
                    self.step()


        def run_engine_core(*args):
            return EngineCore(*args)
    """,
    "vllm/engine/utils.py": """
        def gpu_ids(rank):
            first = rank * 2
            return [first, first + 1]
    """,
    "vllm/sched/__init__.py": "",
    "vllm/sched/scheduler.py": "class Scheduler:\n" + textwrap.indent(_SCHEDULE, "    ") + "\n" + _PICK,
}

B = {
    **A,
    "vllm/config/model.py": '''
        class ModelConfig:
            """The model's settings, reworded: docstrings change nothing."""

            max_len: int = 16

            def verify(self, quant):
                """Checks the quantization (B)."""
                return quant is not None

            def size(self):
                return self.max_len * 4

            def name(self, short=False, full=True):
                return "model"

            @property
            def is_mla(self):
                # a comment, and other spacing: no change
                return (False)
    ''',
    "vllm/engine/core.py": """
        TIMEOUT = 45


        class Engine:
            pass


        class EngineCore:
            def __init__(self, config):
                self.config = config
                self.started = True

            def step(self):
                return self.config

            def shutdown(self):
                return None


        class DPEngineCoreProc(EngineCore):
            def run_busy_loop(self):
                while True:
                    self.step()


        def run_engine_core(*args):
            return EngineCore(*args)
    """,
    "vllm/engine/utils.py": "\n",
    "vllm/worker/__init__.py": "",
    "vllm/worker/devices.py": """
        def gpu_ids(rank):
            first = rank * 2
            return [first, first + 1]
    """,
    "vllm/sched/scheduler.py": "class Scheduler:\n"
    + textwrap.indent(
        _SCHEDULE.replace("        if len(scheduled) >= self.cap:", "        if len(scheduled) > self.cap:"), "    "
    )
    + "\n"
    + _PICK.replace("    chosen.sort()\n", "    chosen.sort(reverse=True)\n"),
}

# The plugin's tree, in this project's words. Each line that couples has a unique text, for its site.
TREE = {
    "pkg/__init__.py": "",
    "pkg/patches.py": """
        import sys

        import vllm
        import vllm.engine.core as core_mod
        from vllm.config import ModelConfig
        from vllm.engine import utils as engine_utils

        ModelConfig.is_mla = property(lambda self: True)
        core_mod.TIMEOUT = 60
        core_mod.EngineCore.abort = lambda self: None
        engine_utils.gpu_ids = lambda rank: [rank]


        def apply(ModelConfig_unused=None):
            setattr(ModelConfig, "size", lambda self: 0)
            for _, module in list(sys.modules.items()):
                setattr(module, "gpu_ids", None)
            vllm.engine.core.EngineCore.step = None
            core_mod.Missing.thing = 1
            name = "run_engine_core"
            setattr(core_mod, name, None)
    """,
    "pkg/reexport.py": """
        from pkg.patches import ModelConfig

        ModelConfig.verify = lambda self, quant: True
    """,
    "pkg/engine.py": """
        from vllm.engine.core import DPEngineCoreProc


        class MyEngine(DPEngineCoreProc):
            def run_busy_loop(self):
                pass

            def __init__(self, config):
                super().__init__(config)

            def shutdown(self):
                pass

            def own(self):
                pass
    """,
    "pkg/imports.py": """
        from vllm import Engine
        from vllm.config.model import ModelConfig
        from vllm.engine.utils import gpu_ids
        from vllm.nothing import missing
    """,
    "pkg/sched.py": "from vllm.sched.scheduler import Scheduler\n\n\n"
    + _PICK.replace("    chosen.sort()\n", "    chosen.sort(reverse=True)\n")
    + "\n\nclass MyScheduler(Scheduler):\n"
    + textwrap.indent(
        _SCHEDULE.replace(
            "        if len(scheduled) >= self.cap:\n", "        if self.frozen or len(scheduled) >= self.cap:\n"
        ),
        "    ",
    ),
    "pkg/broken.py": "def broken(:\n",
    "balance-patchgen.toml": """
        [couplings]
        declared = ["vllm.engine.core.EngineCore.abort", "vllm.config.model.ModelConfig.name"]
    """,
}

# Where each planted name is defined at A and at B (None: absent): this file wrote them there.
DEFINED = {
    "vllm.config.ModelConfig.is_mla": (("vllm/config/model.py", "ModelConfig.is_mla"),) * 2,
    "vllm.config.ModelConfig.verify": (("vllm/config/model.py", "ModelConfig.verify"),) * 2,
    "vllm.config.ModelConfig.size": (("vllm/config/model.py", "ModelConfig.size"),) * 2,
    "vllm.config.model.ModelConfig": (("vllm/config/model.py", "ModelConfig"),) * 2,
    "vllm.config.model.ModelConfig.name": (("vllm/config/model.py", "ModelConfig.name"),) * 2,
    "vllm.engine.core.TIMEOUT": (("vllm/engine/core.py", "TIMEOUT"),) * 2,
    "vllm.engine.core.EngineCore.abort": (("vllm/engine/core.py", "EngineCore.abort"), None),
    "vllm.engine.core.EngineCore.step": (("vllm/engine/core.py", "EngineCore.step"),) * 2,
    "vllm.engine.core.EngineCore.__init__": (("vllm/engine/core.py", "EngineCore.__init__"),) * 2,
    "vllm.engine.core.EngineCore.shutdown": (None, ("vllm/engine/core.py", "EngineCore.shutdown")),
    "vllm.engine.core.DPEngineCoreProc.run_busy_loop": (("vllm/engine/core.py", "DPEngineCoreProc.run_busy_loop"),) * 2,
    "vllm.engine.utils.gpu_ids": (("vllm/engine/utils.py", "gpu_ids"), ("vllm/worker/devices.py", "gpu_ids")),
    "vllm.Engine": (("vllm/engine/core.py", "Engine"),) * 2,
    "vllm.sched.scheduler.pick": (("vllm/sched/scheduler.py", "pick"),) * 2,
    "vllm.sched.scheduler.Scheduler.schedule": (("vllm/sched/scheduler.py", "Scheduler.schedule"),) * 2,
    "vllm.engine.core": (("vllm/engine/core.py", ""),) * 2,
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def truth(upstream: str, old_root: Path, new_root: Path) -> str:
    """The status ``upstream`` must have from A to B, read here from the two releases' files."""
    where_a, where_b = DEFINED[upstream]
    nodes = []
    for root, where in ((old_root, where_a), (new_root, where_b)):
        nodes.append(None if where is None else plain_ast.find(ast.parse((root / where[0]).read_text()), where[1]))
    a, b = nodes
    if a is None and b is None:
        return "unresolved"
    if a is None:
        return "added"
    if b is None:
        return "removed"
    if where_a != where_b:
        return "moved"
    return "unchanged" if plain_ast.plain(a) == plain_ast.plain(b) else "changed"


@pytest.fixture
def releases(tmp_path: Path, local_index: dict[str, bytes]) -> tuple[Path, Path]:
    """Releases v1.0.0 (A) and v1.1.0 (B) on the loopback index; their files also on disk, for the truth."""
    roots = []
    for version, files in (("1.0.0", A), ("1.1.0", B)):
        root = _write(tmp_path / f"vllm-{version}", files)
        members = {rel: (root / rel).read_bytes() for rel in files}
        local_index[wheel_name(version)] = wheel_of(version, members)
        roots.append(root)
    return roots[0], roots[1]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = _write(tmp_path / "plugin", TREE)
    (root / "pkg/latin1.py").write_bytes(b"# caf\xe9\nx = 1\n")
    return root


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def _impact(tree: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    code, out, err = _run(
        "impact", "--root", str(tree), "--from", "v1.0.0", "--to", "v1.1.0", "--format", "json", *extra
    )
    assert code == 0, err
    report = json.loads(out)
    jsonschema.validate(report, SCHEMA)
    return report


def _line(tree: Path, path: str, text: str) -> int:
    lines = (tree / path).read_text().splitlines()
    (number,) = [n for n, line in enumerate(lines, 1) if text in line]
    return number


def test_every_coupling_has_the_status_both_releases_files_give(releases: tuple[Path, Path], tree: Path) -> None:
    report = _impact(tree)
    found = {(c["kind"], c["upstream"]): c for c in report["couplings"]}
    for (kind, upstream), coupling in found.items():
        if upstream in DEFINED and coupling["rule"] != "unresolved" and coupling["status"] != "redundant":
            assert coupling["status"] == truth(upstream, *releases), (kind, upstream, coupling)
    # Each kind and status is there, at its site.
    wanted = {
        ("patch", "vllm.config.ModelConfig.is_mla"): ("pkg/patches.py", "ModelConfig.is_mla = ", "unchanged"),
        ("patch", "vllm.engine.core.TIMEOUT"): ("pkg/patches.py", "core_mod.TIMEOUT", "changed"),
        ("patch", "vllm.engine.core.EngineCore.abort"): ("pkg/patches.py", "EngineCore.abort =", "removed"),
        ("patch", "vllm.engine.utils.gpu_ids"): ("pkg/patches.py", "engine_utils.gpu_ids =", "moved"),
        ("patch", "vllm.config.ModelConfig.size"): ("pkg/patches.py", 'setattr(ModelConfig, "size"', "changed"),
        ("patch", "vllm.engine.core.EngineCore.step"): (
            "pkg/patches.py",
            "vllm.engine.core.EngineCore.step",
            "unchanged",
        ),
        ("patch", "vllm.config.ModelConfig.verify"): ("pkg/reexport.py", "ModelConfig.verify", "unchanged"),
        ("override", "vllm.engine.core.DPEngineCoreProc.run_busy_loop"): (
            "pkg/engine.py",
            "def run_busy_loop",
            "unchanged",
        ),
        ("override", "vllm.engine.core.DPEngineCoreProc.__init__"): ("pkg/engine.py", "def __init__", "changed"),
        ("override", "vllm.engine.core.DPEngineCoreProc.shutdown"): ("pkg/engine.py", "def shutdown", "added"),
        ("import", "vllm.Engine"): ("pkg/imports.py", "import Engine", "unchanged"),
        ("import", "vllm.engine.utils.gpu_ids"): ("pkg/imports.py", "import gpu_ids", "moved"),
        ("import", "vllm.config.model.ModelConfig"): ("pkg/imports.py", "import ModelConfig", "changed"),
        ("copy", "vllm.sched.scheduler.pick"): ("pkg/sched.py", "def pick", "redundant"),
        ("copy", "vllm.sched.scheduler.Scheduler.schedule"): ("pkg/sched.py", "def schedule", "changed"),
        ("declared", "vllm.engine.core.EngineCore.abort"): ("balance-patchgen.toml", "EngineCore.abort", "removed"),
        ("declared", "vllm.config.model.ModelConfig.name"): ("balance-patchgen.toml", "ModelConfig.name", "changed"),
    }
    for key, (path, text, status) in wanted.items():
        assert key in found, key
        assert found[key]["status"] == status, (key, found[key])
        assert found[key]["site"] == f"{path}:{_line(tree, path, text)}", (key, found[key])
    assert found[("override", "vllm.engine.core.DPEngineCoreProc.shutdown")]["name"] == (
        "vllm.engine.core.EngineCore.shutdown"
    )
    assert not any(c["upstream"].endswith(".own") for c in report["couplings"])  # no vLLM base defines it
    # The copy's own edit and upstream's change fall on the same statement.
    copy = found[("copy", "vllm.sched.scheduler.Scheduler.schedule")]
    assert copy["overlap"] and "len(scheduled) >= self.cap" in copy["overlap"][0]
    # Through the tree's own module: pkg.reexport reaches vLLM's ModelConfig through pkg.patches.
    assert found[("patch", "vllm.config.ModelConfig.verify")]["name"] == "vllm.config.model.ModelConfig.verify"


def test_what_cannot_be_named_is_listed_unresolved_with_why(releases: tuple[Path, Path], tree: Path) -> None:
    report = _impact(tree)
    unresolved = [c for c in report["couplings"] if c["status"] == "unresolved"]
    whys = {c["site"]: c.get("why", "") for c in unresolved}
    assert "sys.modules" in whys[f"pkg/patches.py:{_line(tree, 'pkg/patches.py', 'setattr(module,')}"]
    assert "computed at run time" in whys[f"pkg/patches.py:{_line(tree, 'pkg/patches.py', 'setattr(core_mod, name')}"]
    nothing = [c for c in unresolved if c["upstream"] == "vllm.nothing.missing"]
    assert len(nothing) == 1 and nothing[0]["kind"] == "import"
    missing = [c for c in unresolved if c["upstream"] == "vllm.engine.core.Missing.thing"]
    assert len(missing) == 1
    symbol = report["symbols"][missing[0]["upstream"]]
    assert "resolves to nothing at v1.0.0 nor at v1.1.0" in symbol["detail"]


def test_files_that_do_not_parse_or_decode_are_reported_and_skipped(releases: tuple[Path, Path], tree: Path) -> None:
    report = _impact(tree)
    skipped = {s["path"]: s["reason"] for s in report["skipped"]}
    assert skipped == {"pkg/broken.py": "does not parse (line 1)", "pkg/latin1.py": "is not UTF-8 (byte 5)"}
    assert report["files"] == 6  # the tree's other .py files


def test_the_registry_and_the_code_are_compared_both_ways(releases: tuple[Path, Path], tree: Path) -> None:
    report = _impact(tree)
    declared = {c["upstream"]: c["touched"] for c in report["couplings"] if c["kind"] == "declared"}
    assert declared == {"vllm.engine.core.EngineCore.abort": True, "vllm.config.model.ModelConfig.name": False}
    patches = {
        c["upstream"]: c.get("declared")
        for c in report["couplings"]
        if c["kind"] == "patch" and c["status"] != "unresolved"
    }
    assert patches["vllm.engine.core.EngineCore.abort"] is True
    assert patches["vllm.engine.core.TIMEOUT"] is False


def test_diffs_are_upstreams_own_once_per_definition(releases: tuple[Path, Path], tree: Path) -> None:
    report = _impact(tree)
    size = report["symbols"]["vllm.config.ModelConfig.size"]
    assert size["status"] == "changed" and size["parts"] == ["body"]
    assert "-        return self.max_len * 2" in size["diff"] and "+        return self.max_len * 4" in size["diff"]
    assert report["symbols"]["vllm.config.model.ModelConfig.name"]["parts"] == ["signature"]  # declared so
    assert report["symbols"]["vllm.engine.core.TIMEOUT"]["parts"] == ["value"]
    assert "vllm.config.ModelConfig.is_mla" not in report["symbols"]  # unchanged: a comment and spacing
    moved = report["symbols"]["vllm.engine.utils.gpu_ids"]
    assert moved["moved_to"] == "vllm.worker.devices.gpu_ids" and moved["parts"] == []
    assert moved["commits"] is None  # no git source


def test_text_markdown_and_annotations(releases: tuple[Path, Path], tree: Path) -> None:
    base = ("impact", "--root", str(tree), "--from", "v1.0.0", "--to", "v1.1.0")
    code, out, _ = _run(*base)
    assert code == 0
    first, by_status = out.splitlines()[:2]
    assert "couplings of" in first and "breaks" in first and "info" in first
    assert "removed" in by_status and "unchanged" in by_status
    sections = [line for line in out.splitlines() if line.startswith(("breaks (", "review (", "info ("))]
    assert sections[0].startswith("breaks (") and sections[1].startswith("review (")  # breaks lead
    assert sections[-1].startswith("info (") and "--all lists them" in sections[-1]  # counted, not listed
    abort = _line(tree, "pkg/patches.py", "EngineCore.abort =")
    breaks = out.split("\nreview (")[0]
    assert f":{abort} patch vllm.engine.core.EngineCore.abort: removed (gone)" in breaks
    assert ":1 import vllm.Engine" not in out  # unchanged: info
    code, everything, _ = _run(*base, "--all")
    assert code == 0 and "import vllm.Engine (defined as vllm.engine.core.Engine): unchanged (other)" in everything
    code, md, _ = _run(*base, "--format", "markdown")
    assert code == 0 and md.startswith("### What vLLM v1.0.0 -> v1.1.0 does") and "<details>" in md
    code, gh, _ = _run(*base, "--format", "github")
    assert code == 0
    abort = _line(tree, "pkg/patches.py", "EngineCore.abort =")
    assert f"::error file=pkg/patches.py,line={abort}::" in gh


def test_root_after_the_command_and_couplings_at_one_release(releases: tuple[Path, Path], tree: Path) -> None:
    code, out, err = _run("couplings", "--root", str(tree), "--from", "v1.0.0")
    assert code == 0, err
    assert "pkg/patches.py" in out and "patch vllm.engine.core.TIMEOUT" in out
    code, again, _ = _run("--root", str(tree), "couplings", "--from", "v1.0.0")
    assert (code, again) == (0, out)
    code, _, err = _run("--root", str(tree), "couplings", "--root", str(tree.parent), "--from", "v1.0.0")
    assert code == 2 and "--root is given twice" in err


def test_bad_input_is_one_line_and_a_documented_code(releases: tuple[Path, Path], tree: Path, tmp_path: Path) -> None:
    code, _, err = _run("impact", "--root", str(tree), "--to", "v1.1.0")
    assert code == 2 and "has no .github/vllm-release-tag.commit: pass --from TAG" in err
    code, _, err = _run("impact", "--root", str(tree), "--from", "v9.9.9", "--to", "v1.1.0")
    assert code == 3 and "no vLLM 9.9.9 wheel" in err and len(err.strip().splitlines()) == 1
    code, _, err = _run("impact", "--root", str(tree), "--from", "1.0", "--to", "v1.1.0")
    assert code == 2 and "not a plain vLLM release tag" in err
    empty = tmp_path / "empty"
    (empty / "docs").mkdir(parents=True)
    (empty / "docs/readme.txt").write_text("no Python here\n")
    code, _, err = _run("impact", "--root", str(empty), "--from", "v1.0.0", "--to", "v1.1.0")
    assert code == 2 and "holds no Python file" in err
    code, _, err = _run("impact", "--root", str(tree), "--from", "v1.0.0", "--to", "main")
    assert code == 2 and "only a git source has" in err


def test_a_git_source_names_the_commits_that_touched_each_change(tmp_path: Path, tree: Path) -> None:
    repo = git.Repo.init(tmp_path / "vllm-repo")
    repo.config_writer().set_value("user", "name", "test").set_value("user", "email", "t@example.com").release()
    root = Path(repo.working_tree_dir or "")
    _write(root, A)
    repo.git.add(A=True)
    repo.index.commit("release A")
    repo.create_tag("v1.0.0")
    _write(root, {k: v for k, v in B.items() if k != "vllm/engine/utils.py"})
    repo.index.commit("unrelated: nothing")  # no change at all
    (root / "vllm/engine/utils.py").write_text("\n")
    repo.git.add(A=True)
    repo.index.commit("B: move gpu_ids, reword ModelConfig")
    repo.create_tag("v1.1.0")
    code, out, err = _run(
        "impact", "--root", str(tree), "--from", "v1.0.0", "--to", "v1.1.0", "--source", "git",
        "--vllm-repo", str(root), "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    jsonschema.validate(report, SCHEMA)
    size = report["symbols"]["vllm.config.ModelConfig.size"]
    assert [c["subject"] for c in size["commits"]] == ["B: move gpu_ids, reword ModelConfig"]
    branch = repo.active_branch.name
    code, out, err = _run(
        "impact", "--root", str(tree), "--from", "v1.0.0", "--to", branch, "--source", "git",
        "--vllm-repo", str(root),
    )  # fmt: skip
    assert code == 0, err
    assert f"-> {branch}@{repo.head.commit.hexsha[:12]}:" in out.splitlines()[0]


def test_the_read_cache_never_changes_the_report(
    releases: tuple[Path, Path], tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Uncached, cold, warm, and after one file changed: the same report as reading every file afresh."""
    args = ["impact", "--root", str(tree), "--from", "v1.0.0", "--to", "v1.1.0", "--format", "json"]

    def run(cache: bool) -> tuple[str, str]:
        if cache:
            monkeypatch.delenv(tree_read.NO_CACHE_ENV, raising=False)
        else:
            monkeypatch.setenv(tree_read.NO_CACHE_ENV, "1")
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.stderr
        return result.stdout, result.stderr

    afresh, _ = run(cache=False)
    cold, said = run(cache=True)
    assert "; 0 from the cache)" in said
    warm, said = run(cache=True)
    assert "; 7 from the cache)" in said, said  # all but the file that is not UTF-8 (no text to read)
    assert afresh == cold == warm
    (tree / "pkg/imports.py").write_text(
        (tree / "pkg/imports.py").read_text() + "from vllm.engine.core import TIMEOUT\n"
    )
    changed, said = run(cache=True)
    assert "; 6 from the cache)" in said, said
    assert changed == run(cache=False)[0] != warm
    assert any(
        c["upstream"] == "vllm.engine.core.TIMEOUT" and c["kind"] == "import" for c in json.loads(changed)["couplings"]
    )

"""``census``: which functions of a tree are copies of vLLM functions, their closest release, how stale.

The upstream side is real: the installed vLLM's ``scheduler.py`` (CI installs the pin). The trees are
written here, their copies made from that file by editing its AST (formatting does not count), so
every expected count follows from the edits the test makes.
"""

from __future__ import annotations

import ast
import copy as copying
import hashlib
import io
import json
import tarfile
from collections.abc import Collection
from pathlib import Path

import pytest
from click.testing import CliRunner

from balance_dev.package_index import wheel_name, wheel_of
from generator import cli
from generator.errors import SourceUnavailable, UsageError
from generator.judge import census, provenance
from generator.judge.census import matching as census_matching
from generator.judge.census import reading as census_reading
from generator.judge.census import report as census_report
from generator.pins.pin import PIN_FILE, read_pin
from generator.sources import cache, index, releases
from generator.sources.base import UPSTREAM_PATH, UpstreamFile
from generator.sources.resolve import fetch_release_files
from generator.tags import version_key

SCHEDULER = "vllm.v1.core.sched.scheduler.Scheduler.schedule"


def _upstream_tree(root: Path, files: dict[str, str]) -> Path:
    """A vLLM source tree holding ``files`` (paths under vllm/)."""
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def _tree(root: Path, files: dict[str, str], pin: str | None = "v1.1.0") -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    if pin is not None:
        (root / PIN_FILE).parent.mkdir(parents=True, exist_ok=True)
        (root / PIN_FILE).write_text(f"{pin}\n")
    return root


def _method(text: str, cls: str, name: str) -> ast.FunctionDef:
    (found,) = [
        f
        for node in ast.parse(text).body
        if isinstance(node, ast.ClassDef) and node.name == cls
        for f in node.body
        if isinstance(f, ast.FunctionDef) and f.name == name
    ]
    return found


def _module(cls: str, base: str | None, *funcs: ast.stmt) -> str:
    bases = [ast.Name(base, ast.Load())] if base else []
    body = [ast.ClassDef(name=cls, bases=bases, keywords=[], body=list(funcs), decorator_list=[])]
    return ast.unparse(ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))) + "\n"


def _simple(stmt: ast.stmt) -> bool:
    return not any(isinstance(getattr(stmt, f, None), list) and getattr(stmt, f) for f in census_reading.BLOCKS)


def _edited(func: ast.FunctionDef) -> ast.FunctionDef:
    """Three edits, each one differing statement: one added, one changed, one dropped (all at the top level)."""
    edited = copying.deepcopy(func)
    body = edited.body
    changed = next(i for i in range(len(body) - 1, 0, -1) if _simple(body[i]))
    body[changed] = ast.parse("census_changed = 1").body[0]
    dropped = next(i for i in range(2, changed - 2) if _simple(body[i]))
    del body[dropped]
    body.insert(0, ast.parse("self.census_added = 1").body[0])
    return edited


@pytest.fixture
def scheduler_text(upstream_pinned: UpstreamFile) -> str:
    return upstream_pinned.text


@pytest.fixture
def copy_text(scheduler_text: str) -> str:
    """A tree module: the edited copy of schedule(), and a schedule() of the same name that is no copy."""
    copied = _edited(_method(scheduler_text, "Scheduler", "schedule"))
    other = "def schedule(self):\n" + "".join(f"    a{i} = {i}\n" for i in range(6)) + "    return a0\n"
    return _module("MyScheduler", "Scheduler", copied) + "\n\n" + other


# --- Statements, as provenance counts them


def test_statement_keys_and_sizes_are_provenances_on_every_upstream_function(scheduler_text: str) -> None:
    funcs = census.functions(ast.parse(scheduler_text), UPSTREAM_PATH)
    assert len(funcs) > 20
    for func in funcs:
        reduced = provenance.reduce(func.node)  # type: ignore[arg-type]
        assert func.keys == reduced.keys, func.qualname
        assert func.size == len(reduced.statements), func.qualname


def test_functions_are_named_as_python_qualifies_them_and_a_match_statement_reduces() -> None:
    text = (
        "class A:\n"
        "    def f(self):\n"
        "        def inner():\n"
        "            return 1\n"
        "        return inner\n"
        "    class B:\n"
        "        async def g(self):\n"
        "            try:\n"
        "                x = 1\n"
        "            except E:\n"
        "                pass\n"
        "            else:\n"
        "                y = 2\n"
        "            finally:\n"
        "                z = 3\n"
        "if X:\n"
        "    def h(v):\n"
        "        match v:\n"
        "            case 1:\n"
        "                return 'one'\n"
        "            case _:\n"
        "                return 'many'\n"
    )
    funcs = census.functions(ast.parse(text), "m.py")
    assert [f.qualname for f in funcs] == ["A.f", "A.f.<locals>.inner", "A.B.g", "h"]
    for func in funcs:
        reduced = provenance.reduce(func.node)  # type: ignore[arg-type]
        assert func.keys == reduced.keys and func.size == len(reduced.statements)
    # try, x, except, pass, else:, y, finally:, z, plus the def line
    assert funcs[2].size == 9
    assert [s.first for s in provenance.reduce(funcs[3].node).statements] == [17, 18, 19, 20, 21, 22]  # type: ignore[arg-type]


# --- The thresholds


@pytest.mark.parametrize(
    ("kept", "added", "is_copy"),
    [
        (10, 0, True),  # the function itself
        (6, 0, True),  # 7 of 11 statements in common (the def line is one)
        (5, 1, True),  # 6 in common: the least, and 6/11 of the longer
        (4, 0, False),  # 5 in common: fewer than MIN_MATCHED
        (5, 6, True),  # 6 in common of 12: exactly MIN_SHARE
        (5, 7, False),  # 6 in common of 13: under MIN_SHARE
        (8, 10, False),  # 9 in common of 19
        (8, 7, True),  # 9 in common of 16
    ],
)
def test_a_function_is_a_copy_by_statements_in_common_against_both_thresholds(
    tmp_path: Path, kept: int, added: int, is_copy: bool
) -> None:
    up = "def f(v):\n" + "".join(f"    a{i} = v + {i}\n" for i in range(10))
    mine = "def f(v):\n" + "".join(f"    a{i} = v + {i}\n" for i in range(kept))
    mine += "".join(f"    mine{i} = v * {i}\n" for i in range(added))
    upstream = _upstream_tree(tmp_path / "up", {"vllm/mod.py": up})
    tree = _tree(tmp_path / "tree", {"pkg/f.py": mine})
    found = census.run(tree, census.vllm_source(upstream), None, (), None)
    assert [c.upstream_name for c in found.copies] == (["vllm.mod.f"] if is_copy else [])
    assert (census.MIN_MATCHED, census.MIN_SHARE) == (6, 0.5)  # the documented values


def test_a_function_nested_in_a_copy_is_part_of_that_copy(tmp_path: Path) -> None:
    inner = "    def inner(w):\n" + "".join(f"        b{i} = w + {i}\n" for i in range(8)) + "        return b0\n"
    up = "def f(v):\n" + inner + "".join(f"    a{i} = v + {i}\n" for i in range(10))
    upstream = _upstream_tree(tmp_path / "up", {"vllm/mod.py": up})
    tree = _tree(tmp_path / "tree", {"pkg/f.py": up, "pkg/g.py": inner.replace("\n    ", "\n")[4:]})
    found = census.run(tree, census.vllm_source(upstream), None, (), None)
    # f's own inner() is not a second copy; the same function standing alone elsewhere is one.
    assert sorted((c.function.path, c.upstream_name) for c in found.copies) == [
        ("pkg/f.py", "vllm.mod.f"),
        ("pkg/g.py", "vllm.mod.f.<locals>.inner"),
    ]


# --- A tree's copies


def test_the_copy_is_named_with_its_upstream_function_and_differing_statements(
    tmp_path: Path, scheduler_text: str, copy_text: str
) -> None:
    upstream = _upstream_tree(tmp_path / "up", {UPSTREAM_PATH: scheduler_text})
    tree = _tree(tmp_path / "tree", {"pkg/copies.py": copy_text, "pkg/broken.py": "def f(:\n"})
    found = census.run(tree, census.vllm_source(upstream), "v1.1.0", (), None)
    (copy,) = found.copies
    assert (copy.function.qualname, copy.function.path, copy.upstream_name) == (
        "MyScheduler.schedule",
        "pkg/copies.py",
        SCHEDULER,
    )
    assert copy.function.line == 3  # ast.unparse leaves a blank line after the class line
    assert copy.match.comparison.differing == 3
    assert copy.match.comparison.matched == copy.match.upstream.size - 2
    assert copy.dated is None
    assert [(s.path, s.reason) for s in found.skipped] == [("pkg/broken.py", "does not parse (line 1)")]


def test_the_closest_release_ties_and_staleness(tmp_path: Path, scheduler_text: str, copy_text: str) -> None:
    upstream = _upstream_tree(tmp_path / "up", {UPSTREAM_PATH: scheduler_text})
    tree = _tree(tmp_path / "tree", {"pkg/copies.py": copy_text})
    # An older release whose schedule() is the copy, statement for statement (twice: the second file
    # differs only in a comment), the pin with upstream's, a newer one without the file.
    copied = _method(copy_text, "MyScheduler", "schedule")
    older = _module("Scheduler", None, copied)
    texts = {"v1.0.0": older, "v1.0.1": older + "# only a comment\n", "v1.1.0": scheduler_text, "v1.2.0": None}
    asked: list[tuple[str, list[str]]] = []

    def read(tag: str, paths: Collection[str]) -> dict[str, str | None]:
        asked.append((tag, sorted(paths)))
        return {UPSTREAM_PATH: texts[tag]}

    found = census.run(tree, census.vllm_source(upstream), "v1.1.0", list(texts), read)
    assert asked == [(t, [UPSTREAM_PATH]) for t in texts]  # only the files holding a copy are read
    (copy,) = found.copies
    assert copy.dated == census.Dated(
        tag="v1.0.1",  # of equal releases: the newest before the pin
        differing=0,
        same=("v1.0.0", "v1.0.1"),
        edits=(),
        scanned=("v1.0.0", "v1.0.1", "v1.1.0"),
        stale=1,
    )
    assert census_report.closest(copy.dated) == "v1.0.1 (same in v1.0.0..v1.0.1)"
    apart = census.Dated("v1.2", 0, ("v1.0", "v1.2"), (), ("v1.0", "v1.1", "v1.2"), 0)
    assert census_report.closest(apart) == "v1.2 (same in 2 of v1.0..v1.2)"
    # Without the exact releases: the pin's, with the three edits in words.
    found = census.run(tree, census.vllm_source(upstream), "v1.1.0", ["v1.1.0", "v1.2.0"], read)
    dated = found.copies[0].dated
    assert dated is not None
    assert (dated.tag, dated.differing, dated.stale, dated.same) == ("v1.1.0", 3, 0, ("v1.1.0",))
    described = [e.describe("v1.1.0") for e in dated.edits]
    assert len(described) == 3
    assert "added: `self.census_added = 1`" in described[0]
    assert any(d.startswith("drops v1.1.0's line") for d in described)
    assert any("`census_changed = 1` instead of v1.1.0's" in d for d in described)
    # A copy newer than the pin is negative stale; an unknown pin is no count.
    newer = census.run(tree, census.vllm_source(upstream), "v0.9.0", ["v1.0.0", "v1.1.0"], read)
    assert newer.copies[0].dated is not None and newer.copies[0].dated.stale is None
    dated = census.date(
        copy.function, UPSTREAM_PATH, "Scheduler.schedule", {"v0.9.0": scheduler_text, **texts}, "v0.9.0"
    )
    assert dated is not None and (dated.tag, dated.stale) == ("v1.0.0", -1)


def test_a_renamed_copy_is_found_only_when_asked(tmp_path: Path, scheduler_text: str) -> None:
    funcs = census.functions(ast.parse(scheduler_text), UPSTREAM_PATH)
    names = [f.name for f in funcs]
    chosen = next(f for f in funcs if 12 <= f.size <= 60 and names.count(f.name) == 1 and f.name != "schedule")
    renamed = copying.deepcopy(chosen.node)
    renamed.name = "patched_by_census"
    upstream = _upstream_tree(tmp_path / "up", {UPSTREAM_PATH: scheduler_text})
    tree = _tree(tmp_path / "tree", {"pkg/patch.py": ast.unparse(ast.fix_missing_locations(renamed)) + "\n"})
    assert census.run(tree, census.vllm_source(upstream), None, (), None).copies == ()
    found = census.run(tree, census.vllm_source(upstream), None, (), None, renamed=True)
    (copy,) = found.copies
    assert copy.upstream_name == f"vllm.v1.core.sched.scheduler.{chosen.qualname}"
    assert copy.match.comparison.differing == 1  # the def line: its name
    assert census.to_json(found)["copies"][0]["renamed"] is True


def test_a_renamed_copy_of_mostly_common_statements_is_not_pruned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Candidates come from rare statements; the common ones the copy has still count towards the bound."""
    monkeypatch.setattr(census_matching, "COMMON_POSTINGS", 1)  # a statement in two upstream functions is common
    first = "def g1(v):\n" + "".join(f"    a{i} = v + {i}\n" for i in range(10))
    second = "def g2(v):\n" + "".join(f"    a{i} = v + {i}\n" for i in range(8)) + "    b = 0\n"
    # a0-a4 (common), a8 and a9 (g1's alone), four of its own: 7 of 12 in common with g1.
    mine = "def mine(v):\n" + "".join(f"    a{i} = v + {i}\n" for i in (0, 1, 2, 3, 4, 8, 9))
    mine += "".join(f"    c{i} = v * {i}\n" for i in range(4))
    upstream = _upstream_tree(tmp_path / "up", {"vllm/mod.py": first + second})
    tree = _tree(tmp_path / "tree", {"pkg/f.py": mine})
    found = census.run(tree, census.vllm_source(upstream), None, (), None, renamed=True)
    assert [(c.upstream_name, c.match.comparison.matched) for c in found.copies] == [("vllm.mod.g1", 7)]


def test_the_index_source_is_a_vllm_package_or_a_folder_holding_one(tmp_path: Path) -> None:
    upstream = _upstream_tree(tmp_path / "up", {"vllm/_version.py": "__version__ = version = '1.2.3'\n"})
    for given in (upstream, upstream / "vllm"):
        source = census.vllm_source(given)
        assert (source.where, source.version, source.origin) == (str(upstream / "vllm"), "1.2.3", str(given))
    with pytest.raises(UsageError, match="neither vLLM's package folder"):
        census.vllm_source(tmp_path)


# --- The command


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_cli_text_and_json_without_releases(tmp_path: Path, scheduler_text: str, copy_text: str) -> None:
    upstream = _upstream_tree(tmp_path / "up", {UPSTREAM_PATH: scheduler_text})
    tree = _tree(tmp_path / "tree", {"pkg/copies.py": copy_text})
    code, out, _ = _invoke("--root", str(tree), "census", "--vllm-source", str(upstream), "--no-releases")
    assert code == 0, out
    header, row = out.splitlines()[:2]
    assert header.split() == ["function", "file:line", "upstream", "closest", "stale", "by", "differing"]
    assert row.split() == ["MyScheduler.schedule", "pkg/copies.py:3", SCHEDULER, "-", "-", "3"]
    assert out.splitlines()[-1].startswith(f"1 copy of vLLM functions in {tree} (the same name; 6+ statements")
    code, out, _ = _invoke(
        "--root", str(tree), "census", "--vllm-source", str(upstream), "--no-releases", "--format", "json"
    )
    report = json.loads(out)
    assert report["pin"] == "v1.1.0" and report["thresholds"] == {"min_matched": 6, "min_share": 0.5}
    (entry,) = report["copies"]
    assert entry["function"] == "MyScheduler.schedule" and entry["upstream"]["name"] == SCHEDULER
    assert (entry["upstream"]["differing"], entry["closest"]) == (3, None)


def test_cli_reads_each_release_from_the_index_once(
    tmp_path: Path,
    local_index: dict[str, bytes],
    monkeypatch: pytest.MonkeyPatch,
    scheduler_text: str,
    copy_text: str,
) -> None:
    copied = _method(copy_text, "MyScheduler", "schedule")
    older = _module("Scheduler", None, copied).encode()
    for version, text in (("1.0.0", older), ("1.1.0", scheduler_text.encode())):
        local_index[wheel_name(version)] = wheel_of(version, {UPSTREAM_PATH: text, "vllm/other.py": b"x = 1\n"})
    upstream = _upstream_tree(tmp_path / "up", {UPSTREAM_PATH: scheduler_text})
    tree = _tree(tmp_path / "tree", {"pkg/copies.py": copy_text})
    args = ("--root", str(tree), "census", "--vllm-source", str(upstream), "--since", "v1.0.0")
    code, out, err = _invoke(*args)
    assert code == 0, err
    row = out.splitlines()[1].split()
    assert row[3:] == ["v1.0.0", "1", "0"], out
    assert f"fetching {UPSTREAM_PATH} from vllm-1.0.0-" in err
    # Again: the releases' files come from the cache; only the listing of releases is read.
    monkeypatch.setattr(index, "RangeReader", _no_range_reads)
    code, again, err = _invoke(*args, "--format", "json")
    assert code == 0, err
    closest = json.loads(again)["copies"][0]["closest"]
    assert (closest["tag"], closest["stale"], closest["scanned"]) == ("v1.0.0", 1, ["v1.0.0", "v1.1.0"])
    # From the pin on: upstream's own, and its differing statements listed.
    code, out, err = _invoke(*args[:-1], "v1.1.0", "--edits")
    assert code == 0, err
    assert out.splitlines()[1].split()[3:] == ["v1.1.0", "0", "3"]
    listed = out.split("pkg/copies.py:3 MyScheduler.schedule against v1.1.0:\n", 1)[1].split("\n\n")[0]
    assert len(listed.splitlines()) == 3 and "added: `self.census_added = 1`" in listed


def _no_range_reads(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("read a wheel although its files are cached")


# --- The release files, by path (resolve.fetch_release_files)


def test_release_files_by_path_are_checked_cached_and_share_the_scheduler_entry(
    local_index: dict[str, bytes], monkeypatch: pytest.MonkeyPatch, scheduler_text: str
) -> None:
    members = {UPSTREAM_PATH: scheduler_text.encode(), "vllm/v1/other.py": b"def f():\n    return 1\n"}
    local_index[wheel_name("9.0.0")] = wheel_of("9.0.0", members)
    wanted = [UPSTREAM_PATH, "vllm/v1/other.py", "vllm/v1/absent.py"]
    assert fetch_release_files("v9.0.0", wanted) == {**members, "vllm/v1/absent.py": None}
    # scheduler.py where fetch_upstream has always kept it; other files by their path.
    assert (cache.cache_root() / "upstream" / "v9.0.0" / "scheduler.py").read_bytes() == members[UPSTREAM_PATH]
    assert cache.load("v9.0.0") == members[UPSTREAM_PATH]
    assert cache.load("v9.0.0", "vllm/v1/other.py") == members["vllm/v1/other.py"]
    # From the cache alone, the absent file included (the wheel's list of files is cached).
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    assert fetch_release_files("v9.0.0", wanted) == {**members, "vllm/v1/absent.py": None}
    # A corrupted entry is dropped and read again; offline, that is an unavailable source.
    entry = cache.cache_root() / "upstream" / "v9.0.0" / "files" / "vllm" / "v1" / "other.py"
    entry.write_bytes(b"edited\n")
    with pytest.raises(SourceUnavailable, match="cannot read the package index"):
        fetch_release_files("v9.0.0", wanted)
    assert not entry.exists()


def test_a_release_file_that_does_not_match_the_record_is_refused(local_index: dict[str, bytes]) -> None:
    members = {"vllm/v1/other.py": b"x = 2\n"}
    local_index[wheel_name("9.0.0")] = wheel_of("9.0.0", members, record={"vllm/v1/other.py": b"x = 1\n"})
    with pytest.raises(
        SourceUnavailable, match=r"vllm/v1/other\.py in vllm-9\.0\.0-.* does not match the wheel's RECORD"
    ):
        fetch_release_files("v9.0.0", ["vllm/v1/other.py"])
    assert cache.load("v9.0.0", "vllm/v1/other.py") is None


@pytest.mark.parametrize("path", ["vllm/../secret.py", "other/x.py", "vllm/x.txt", "/vllm/x.py", "vllm//x.py"])
def test_the_cache_keys_only_files_of_vllms_package(path: str) -> None:
    with pytest.raises(UsageError, match="not a file of vLLM's package"):
        cache.store("v9.0.0", b"x", path)


# --- vllm-ascend 0.30.0rc2, read from the index

ASCEND = "0.30.0rc2"
FOUR = {
    # qualified name: (file, closest release, differing statements, releases stale against its pin v0.30.0)
    "BalanceScheduler.schedule": ("vllm_ascend/patch/platform/patch_balance_schedule.py", "v0.24.0", 21, 8),
    "RecomputeScheduler.schedule": ("vllm_ascend/core/recompute_scheduler.py", "v0.30.0", 19, 0),
    "DyntraLBScheduler.schedule": ("vllm_ascend/core/dyntra_lb_scheduler.py", "v0.27.1", 37, 3),
    "ProfilingChunkScheduler.schedule": ("vllm_ascend/core/scheduler_profiling_chunk.py", "v0.30.0", 120, 0),
}


def _sdist(version: str) -> bytes:
    """vllm-ascend ``version``'s sdist, held to the sha256 the index publishes, cached under the cache root."""
    name = f"vllm_ascend-{version}.tar.gz"
    path = cache.cache_root() / "vllm-ascend" / version / name
    if (data := cache.load_at(path)) is not None:
        return data
    (listed,) = [f for f in index.list_files("vllm-ascend") if f.filename == name]
    assert listed.sha256 is not None
    data = index.RangeReader(listed.url, listed.size, index.Deadline(600), sha256=listed.sha256).read()
    assert hashlib.sha256(data).hexdigest() == listed.sha256
    cache.store_at(path, data)
    return data


@pytest.mark.network
def test_vllm_ascend_0_30_0rc2_holds_four_copies_of_schedule(tmp_path: Path) -> None:
    wanted = {str(PIN_FILE), *(f for f, *_ in FOUR.values())}
    tree = tmp_path / "tree"
    with tarfile.open(fileobj=io.BytesIO(_sdist(ASCEND)), mode="r:gz") as tar:
        for member in tar:
            rel = member.name.split("/", 1)[-1]
            handle = tar.extractfile(member) if member.isfile() and rel in wanted else None
            if handle is not None:
                (tree / rel).parent.mkdir(parents=True, exist_ok=True)
                (tree / rel).write_bytes(handle.read())
    pin = read_pin(tree / PIN_FILE)
    assert pin == "v0.30.0"
    newest = version_key("0.33.0")  # the newest release when this was written: later ones leave it as is
    tags = [t for t in releases.released_tags("v0.13.0") if version_key(t[1:]) <= newest]
    assert len(tags) == 31
    # Indexed against the tree's own pin (scheduler.py of v0.30.0), not whatever vLLM this interpreter has:
    # from 0.33 on, a v0.24.0 body shares under half its statements with upstream's schedule().
    pinned = fetch_release_files(pin, [UPSTREAM_PATH])[UPSTREAM_PATH]
    assert pinned is not None
    upstream = _upstream_tree(tmp_path / "up", {UPSTREAM_PATH: pinned.decode()})
    found = census.run(tree, census.vllm_source(upstream), pin, tags, census.release_reader())
    got = {
        c.function.qualname: (c.function.path, c.dated.tag, c.dated.differing, c.dated.stale)
        for c in found.copies
        if c.upstream_name == SCHEDULER and c.dated is not None
    }
    assert got == FOUR
    dyntra = next(c for c in found.copies if c.function.qualname == "DyntraLBScheduler.schedule")
    assert dyntra.dated is not None and dyntra.dated.same == ("v0.27.0", "v0.27.1")

"""The judging of ``adapt`` against a maintainers' release, on trees written here with their answers.

Each test writes vLLM's files at B, P_A's file, P_B's file (what the maintainers wrote) and adapt's
result by hand, and says what the comparison must find: which moved names each side rewrote, what
happened to each copy, which upstream statements a re-sync took, whether a written copy holds both
sides' changes. Nothing is read from ``adapt`` or ``judge.resync``.
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from balance_dev.adapt_history import copies, names, reach, refs, run, statements
from generator.sources import package


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# vLLM at A and at B: ``Name`` moved from vllm/a.py to vllm/b.py; ``Other`` stayed in vllm/a.py; vllm/old.py
# is gone; ``Thing`` is new in vllm/b.py at B, and vllm/main_only.py is in neither release.
AT_A = {
    "vllm/__init__.py": "",
    "vllm/a.py": "Other = 1\n\n\nclass Name:\n    def method(self):\n        return 1\n",
    "vllm/old.py": "class Name:\n    pass\n",
}
AT_B = {
    "vllm/__init__.py": "",
    "vllm/a.py": "Other = 1\n",
    "vllm/b.py": _src(
        """
        class Name:
            def method(self):
                return 1


        Thing = 2
        """
    ),
    "vllm/c.py": "from vllm.b import Name\n",
    "vllm/lazy.py": "def __getattr__(name):\n    return name\n",
}


def test_what_a_release_defines_is_read_from_its_files() -> None:
    at_b = AT_B.get
    assert refs.defines("vllm.b.Name.method", at_b)
    assert refs.defines("vllm.b", at_b)
    assert refs.defines("vllm.c.Name", at_b)  # a re-export is a binding
    assert refs.defines("vllm.lazy.anything", at_b)  # a module __getattr__ answers its names
    assert not refs.defines("vllm.lazy.sub.Name", at_b)  # ...never a submodule's
    assert not refs.defines("vllm.a.Name", at_b)
    assert not refs.defines("vllm.b.Name.gone", at_b)  # a class without bases: its own members only
    assert not refs.defines("vllm.old.Name", at_b)


def test_a_files_vllm_paths_by_kind() -> None:
    tree = ast.parse(
        _src(
            """
            import vllm.a
            from vllm.a import Name as N, Other
            from .local import thing
            vllm.a.Name.method(1)
            patch("vllm.a.Name.method", new=1)
            label = "vllm.a.Name"
            """
        )
    )
    found = refs.refs(tree)
    assert found == {
        refs.Ref("import", "vllm.a"),
        refs.Ref("import", "vllm.a.Name"),
        refs.Ref("import", "vllm.a.Other"),
        refs.Ref("attribute", "vllm.a.Name.method"),  # the whole chain, not its parts
        refs.Ref("string", "vllm.a.Name.method"),  # a call's argument; a plain assignment's string is no path
    }


P_A = _src(
    """
    import vllm.a
    from vllm.a import Name, Other
    from vllm.a import Other as O2
    from vllm.main_only import Thing

    vllm.a.Name.method()
    patch("vllm.a.Name.method")
    """
)
# The maintainers: the import and the string moved to vllm.b; the attribute path to the re-export in vllm.c;
# ``Other`` (not moved) imported from vllm.c is a refactoring, not a move: vllm.a.Other still stands at B.
P_B = _src(
    """
    import vllm.a
    import vllm.c
    from vllm.a import Other
    from vllm.b import Name
    from vllm.c import Name as O2
    from vllm.b import Thing

    vllm.c.Name.method()
    patch("vllm.b.Name.method")
    """
)
# adapt: the import as P_B, the attribute path to vllm.b (another name than P_B's), the string left.
ADAPTED = _src(
    """
    import vllm.a
    import vllm.b
    from vllm.a import Other
    from vllm.b import Name
    from vllm.a import Other as O2
    from vllm.main_only import Thing

    vllm.b.Name.method()
    patch("vllm.a.Name.method")
    """
)
# A second file: adapt rewrote a path the maintainers kept, one they dropped; a third file P_B deleted.
P_A_2 = 'from vllm.a import Name\npatch("vllm.a.Name.method")\n'
P_B_2 = "from vllm.a import Name\n"
ADAPTED_2 = 'from vllm.b import Name\npatch("vllm.b.Name.method")\n'


def test_moved_names_the_maintainers_rewrote_and_what_adapt_wrote_for_each() -> None:
    p_a = {"plug/x.py": P_A, "plug/y.py": P_A_2, "plug/z.py": P_A_2}
    p_b = {"plug/x.py": P_B, "plug/y.py": P_B_2}
    adapted = {"plug/x.py": ADAPTED, "plug/y.py": ADAPTED_2, "plug/z.py": ADAPTED_2}
    rows = names.compare(p_a, p_a, p_b, adapted, AT_A.get, AT_B.get)
    got = {(r.file, r.kind, r.old): (r.maintainers, r.adapt, r.outcome) for r in rows}
    assert got == {
        ("plug/x.py", "import", "vllm.a.Name"): ("vllm.b.Name", "vllm.b.Name", "same"),
        ("plug/x.py", "attribute", "vllm.a.Name.method"): ("vllm.c.Name.method", "vllm.b.Name.method", "adapt-other"),
        ("plug/x.py", "string", "vllm.a.Name.method"): ("vllm.b.Name.method", None, "adapt-left"),
        ("plug/x.py", "import", "vllm.main_only.Thing"): ("vllm.b.Thing", None, "not-at-a"),
        ("plug/y.py", "import", "vllm.a.Name"): (None, "vllm.b.Name", "maintainers-kept"),
        ("plug/y.py", "string", "vllm.a.Name.method"): (None, "vllm.b.Name.method", "maintainers-dropped"),
        ("plug/z.py", "import", "vllm.a.Name"): (None, "vllm.b.Name", "file-gone"),
        ("plug/z.py", "string", "vllm.a.Name.method"): (None, "vllm.b.Name.method", "file-gone"),
    }
    assert names.counts(rows) == {
        "maintainers_rewrote": 3,
        "same": 1,
        "adapt_other": 1,
        "adapt_left": 1,
        "not_at_a": 1,
        "adapt_rewrote": 6,
        "adapt_only": {"maintainers-spell-it": 0, "maintainers-kept": 1, "maintainers-dropped": 1, "file-gone": 2},
    }


# Upstream's function at A and at B: B changed ``c = 3`` to ``c = 4``, added ``d = 5`` and dropped ``b = 2``.
BASE = _src(
    '''
    def step(self, x):
        """Docstrings never count."""
        a = 1
        b = 2
        c = 3
        if x:
            y = a
        return a
    '''
)
THEIRS = _src(
    '''
    def step(self, x):
        """Reworded."""
        a = 1
        c = 4
        if x:
            y = a
            d = 5
        return a
    '''
)
# The plugin's copy (a method of its own class) adds ``log(x)`` after ``a = 1``: its own edit.
COPY = _src(
    """
    def step(self, x):
        a = 1
        log(x)
        b = 2
        c = 3
        if x:
            y = a
        return a
    """
)
# A right re-sync: B's function with the copy's edit.
RESYNCED = _src(
    """
    def step(self, x):
        a = 1
        log(x)
        c = 4
        if x:
            y = a
            d = 5
        return a
    """
)


def _keys(text: str) -> list[str]:
    return statements.keys(ast.parse(text).body[0])


def test_a_right_merge_holds_both_sides_changes() -> None:
    found = statements.check(_keys(BASE), _keys(COPY), _keys(THEIRS), _keys(RESYNCED))
    assert found.holds


@pytest.mark.parametrize(
    ("result", "failed"),
    [
        (RESYNCED.replace("        d = 5\n", ""), "missing_upstream"),
        (RESYNCED.replace("    c = 4\n", "    b = 2\n    c = 4\n"), "kept_removed"),
        (RESYNCED.replace("    log(x)\n", ""), "missing_own"),
        (RESYNCED.replace("    return a\n", "    return a + 1\n"), "other"),
        (RESYNCED.replace("    a = 1\n", "    a = 1\n    z = 0\n"), "other"),
    ],
    ids=["upstream-addition-lost", "upstream-removal-undone", "own-edit-lost", "statement-changed", "invented"],
)
def test_a_wrong_merge_is_named_by_what_it_lacks(result: str, failed: str) -> None:
    found = statements.check(_keys(BASE), _keys(COPY), _keys(THEIRS), _keys(result))
    assert not found.holds
    assert getattr(found, failed)


def test_a_statement_the_copy_removed_must_stay_removed() -> None:
    own_removal = COPY.replace("        y = a\n", "        pass\n")
    right = RESYNCED.replace("        y = a\n", "        pass\n")
    assert statements.check(_keys(BASE), _keys(own_removal), _keys(THEIRS), _keys(right)).holds
    found = statements.check(_keys(BASE), _keys(own_removal), _keys(THEIRS), _keys(RESYNCED))
    assert found.undone_own and found.missing_own  # ``y = a`` back, ``pass`` lost


def _module(*functions: str) -> ast.Module:
    body = "".join(textwrap.indent(f, "    ") + "\n" for f in functions)
    return ast.parse("class Plugin:\n" + body)


def _input(p_b: ast.Module | None, adapted: ast.Module, reported: str | None) -> copies.CopyInput:
    return copies.CopyInput(
        "plug/sched.py",
        2,
        "vllm.core.Scheduler.step",
        ast.parse(BASE).body[0],
        ast.parse(THEIRS).body[0],
        _module(COPY),
        p_b,
        adapted,
        reported,
    )


def test_a_copy_the_maintainers_resynced_as_adapt_did() -> None:
    row = copies.judge(_input(_module(RESYNCED), _module(RESYNCED), "re-synced"))
    assert row is not None
    assert (row.qualname, row.maintainers, row.adapt, row.equal_to_maintainers) == (
        "Plugin.step",
        "re-synced",
        "re-synced",
        True,
    )
    assert (row.taken, row.held) == (2, 2)  # c = 4 and d = 5
    assert row.check is not None and row.check.holds


def test_a_copy_adapt_left_as_a_conflict() -> None:
    row = copies.judge(_input(_module(RESYNCED), _module(COPY), "conflict"))
    assert row is not None
    assert (row.maintainers, row.adapt, row.equal_to_maintainers, row.check) == ("re-synced", "conflict", False, None)
    assert (row.taken, row.held) == (2, 0)
    summary = copies.summary([row])
    assert summary["statements"] == {"taken": 2, "held": 0, "in_conflict": 2, "missing": 0}
    assert summary["maintainers_resynced"] == {"total": 1, "adapt_equal": 0, "adapt_conflict": 1, "adapt_other": 0}


def test_a_copy_the_maintainers_left_stale_and_one_they_removed() -> None:
    stale = copies.judge(_input(_module(COPY), _module(RESYNCED), "re-synced"))
    gone = copies.judge(_input(ast.parse("class Plugin:\n    pass\n"), _module(COPY), "conflict"))
    assert stale is not None and gone is not None
    assert (stale.maintainers, stale.adapt, stale.equal_to_maintainers) == ("stale", "re-synced", None)
    assert (gone.maintainers, gone.adapt) == ("gone", "conflict")
    summary = copies.summary([stale, gone])
    assert summary["maintainers_stale"] == {"total": 1, "adapt_resynced": 1, "adapt_conflict": 0, "adapt_other": 0}
    assert summary["maintainers_gone"] == 1
    assert summary["adapt_written"] == {"total": 1, "holds": 1, "unchanged": 0}


def test_a_conflict_adapt_changed_anyway_is_a_problem() -> None:
    row = copies.judge(_input(_module(RESYNCED), _module(RESYNCED), "conflict"))
    assert row is not None and row.problems == ["reported as a conflict, yet adapt's function differs from P_A's"]


def test_a_copy_re_synced_to_itself_is_checked_too() -> None:
    # The copy already held B's changes (its maintainers had taken them before the release): the merge is the copy.
    holding = copies.CopyInput(
        "plug/sched.py",
        2,
        "vllm.core.Scheduler.step",
        ast.parse(BASE).body[0],
        ast.parse(THEIRS).body[0],
        _module(RESYNCED),
        _module(RESYNCED),
        _module(RESYNCED),
        "re-synced",
    )
    row = copies.judge(holding)
    assert row is not None and row.check is not None
    assert (row.maintainers, row.unchanged, row.check.holds) == ("stale", True, True)
    lacking = copies.judge(_input(_module(COPY), _module(COPY), "re-synced"))  # reported re-synced, B's changes absent
    assert lacking is not None and lacking.check is not None and not lacking.check.holds
    assert copies.summary([row, lacking])["adapt_written"] == {"total": 2, "holds": 1, "unchanged": 2}


def test_a_copy_whose_upstream_did_not_change_is_no_row() -> None:
    found = copies.CopyInput(
        "plug/sched.py",
        2,
        "vllm.core.Scheduler.step",
        ast.parse(BASE).body[0],
        ast.parse(BASE.replace("Docstrings never count.", "Nor here.")).body[0],
        _module(COPY),
        _module(COPY),
        _module(COPY),
        None,
    )
    assert copies.judge(found) is None


def test_adapts_report_lines_name_each_copy_by_its_site() -> None:
    stdout = _src(
        """
        adapt v0.1.0 -> v0.2.0: wrote 2 files: 1 names rewritten, 1 copies re-synced; 2 left; 0 files skipped
          renamed plug/x.py:3 import vllm.a.Name -> vllm.b.Name
          re-synced plug/sched.py:2 vllm.core.Scheduler.step (now v0.2.0's with the tree's edits)
          left conflict plug/other.py:10 vllm.core.Scheduler.other: both sides change statement 3
            A:
          left redundant plug/r.py:4 vllm.core.f: the copy is B's function
        """
    )
    assert run.report_outcomes(stdout) == {("plug/sched.py", 2): "re-synced", ("plug/other.py", 10): "conflict"}


def test_judge_pair_reads_upstream_where_impacts_json_says() -> None:
    a = package.from_members(
        "v0.1.0", "test", {"vllm/core.py": ("class Scheduler:\n" + textwrap.indent(BASE, "    ")).encode()}
    )
    b = package.from_members(
        "v0.2.0", "test", {"vllm/core.py": ("X = 1\n\n\nclass Scheduler:\n" + textwrap.indent(THEIRS, "    ")).encode()}
    )
    report = {
        "couplings": [{"kind": "copy", "site": "plug/sched.py:2", "upstream": "vllm.core.Scheduler.step"}],
        "symbols": {
            "vllm.core.Scheduler.step": {
                "from": {
                    "name": "vllm.core.Scheduler.step",
                    "kind": "function",
                    "path": "vllm/core.py",
                    "lines": [2, 9],
                },
                "to": {
                    "name": "vllm.core.Scheduler.step",
                    "kind": "function",
                    "path": "vllm/core.py",
                    "lines": [5, 12],
                },
            }
        },
    }
    tree = "class Plugin:\n" + textwrap.indent(COPY, "    ")
    merged = "class Plugin:\n" + textwrap.indent(RESYNCED, "    ")
    stdout = "adapt ...\n  re-synced plug/sched.py:2 vllm.core.Scheduler.step (now v0.2.0's)\n"
    found = run.judge_pair(
        report, stdout, {"plug/sched.py": tree}, {"plug/sched.py": merged}, {"plug/sched.py": merged}, a, b
    )
    assert found["copies"]["maintainers_resynced"]["adapt_equal"] == 1
    assert found["copies"]["adapt_written"] == {"total": 1, "holds": 1, "unchanged": 0}
    assert found["names"]["maintainers_rewrote"] == 0


def test_names_impact_called_moved_and_gone_still_reached_after_adapt() -> None:
    def coupling(upstream: str, site: str, status: str, rule: str, test: bool = False) -> dict[str, object]:
        return {"upstream": upstream, "site": site, "kind": "import", "status": status, "rule": rule, "test": test}

    before = {
        "couplings": [
            coupling("vllm.a.Name", "plug/x.py:1", "moved", "gone"),
            coupling("vllm.a.Kept", "plug/x.py:2", "moved", "gone"),
            coupling("vllm.a.Name", "tests/t.py:1", "moved", "gone", test=True),
            coupling("vllm.c.Re", "plug/x.py:3", "moved", "moved-reexported"),  # still reached: not adapt's to fix
        ]
    }
    after = {
        "couplings": [
            coupling("vllm.b.Name", "plug/x.py:1", "unchanged", "other"),
            coupling("vllm.a.Kept", "plug/x.py:2", "unresolved", "unresolved"),
            coupling("vllm.c.Re", "plug/x.py:3", "unchanged", "other"),
        ]
    }
    found = reach.check(before, after, {"vllm.a.Name": "left (name): a patch assigns it"})
    assert found["moved_gone"] == {"code": 2, "tests": 1}
    assert found["still_reached"] == {"code": 1, "tests": 0}
    assert [(r["upstream"], r["adapt"]) for r in found["rows"]] == [("vllm.a.Kept", "not reported")]
    assert found["still_reached_unreported"] == 1


def test_what_adapts_report_left_by_name() -> None:
    stdout = _src(
        """
        adapt v0.1.0 -> v0.2.0: wrote 0 files: 0 names rewritten, 0 copies re-synced; 3 left; 0 files skipped
          left name plug/x.py:4 vllm.a.f: a patch assigns it; B defines it as vllm.b.f
          left name plug/y.py:9 vllm.a.f: gone at B, with no successor found
          left signature plug/x.py:7 vllm.a.C.m: its signature changed
            A: def m(self):
        """
    )
    assert run.report_left(stdout) == {
        "vllm.a.f": "left (name): a patch assigns it; B defines it as vllm.b.f",
        "vllm.a.C.m": "left (signature): its signature changed",
    }


def test_a_version_guard_the_maintainers_dropped_is_their_rewrite() -> None:
    # P_A imported Name from A's module at A and from B's otherwise; P_B keeps B's alone; adapt rewrote A's branch.
    guarded = _src(
        """
        if vllm_version_is("0.1.0"):
            from vllm.a import Name
        else:
            from vllm.b import Name
        """
    )
    both_new = guarded.replace("from vllm.a import Name", "from vllm.b import Name")
    p_a = {"plug/g.py": guarded}
    rows = names.compare(
        p_a, p_a, {"plug/g.py": "from vllm.b import Name\n"}, {"plug/g.py": both_new}, AT_A.get, AT_B.get
    )
    assert [(r.old, r.maintainers, r.adapt, r.outcome) for r in rows] == [
        ("vllm.a.Name", "vllm.b.Name", "vllm.b.Name", "same")
    ]
    untouched = names.compare(p_a, p_a, {"plug/g.py": "from vllm.b import Name\n"}, p_a, AT_A.get, AT_B.get)
    assert [(r.maintainers, r.adapt, r.outcome) for r in untouched] == [("vllm.b.Name", None, "adapt-left")]


def test_an_annotation_is_read_for_what_it_means_and_code_as_written() -> None:
    old = (
        "def f(x: Optional[int], y: typing.Union[str, None] = None) -> List[Dict[str, int]]:\n"
        "    z: Optional[int] = g(Optional[int])\n"
    )
    new = "def f(x: int | None, y: str | None = None) -> list[dict[str, int]]:\n    z: int | None = g(Optional[int])\n"
    assert _keys(old) == _keys(new)
    assert _keys(old) != _keys(new.replace("g(Optional[int])", "g(int | None)"))
    assert _keys(old) != _keys(new.replace("y: str | None", "y: str"))


def test_signatures_compare_what_each_takes_of_b_s_new_parameters() -> None:
    import ast as _ast

    from balance_dev.adapt_history import signatures

    old = _ast.parse("def f(self, a, b=None):\n    pass\n").body[0]
    new = _ast.parse("def f(self, a, b=None, c=0, *, d=False):\n    pass\n").body[0]
    assert isinstance(old, _ast.FunctionDef) and isinstance(new, _ast.FunctionDef)
    p_a = _ast.parse("class C:\n    def f(self, a, b=None):\n        pass\n")
    p_b = _ast.parse("class C:\n    def f(self, a, b=None, c=0, *, d=False):\n        pass\n")
    same = _ast.parse("class C:\n    def f(self, a, b=None, c=0, d=False):\n        pass\n")  # d: @4, not kw
    row = signatures.judge("pkg/x.py:2", "vllm.x.C.f", old, new, (p_a, p_b, same), "C.f")
    assert row is not None
    assert (row.b_added, row.at_a, row.maintainers, row.adapt) == (("c", "d"), ("-", "-"), ("@3", "kw"), ("@3", "@4"))
    assert row.maintainers_changed and not row.same_calls
    kw = _ast.parse("class C:\n    def f(self, a, b=None, **kwargs):\n        pass\n")
    row = signatures.judge("pkg/x.py:2", "vllm.x.C.f", old, new, (p_a, kw, p_b), "C.f")
    assert row is not None and row.maintainers == ("**", "**") and not row.same_calls
    assert signatures.summary([row]) == {
        "b_changed": 1,
        "maintainers_changed": 1,
        "adapt_same_calls": 0,
        "adapt_changed_where_maintainers_did_not": 0,
    }


def test_a_conflict_whose_dead_gates_were_retired_is_the_copy_as_the_bump_leaves_it() -> None:
    # The copy gates a statement on a release older than B: retiring that gate is the bump's (adapt's gates
    # part), so a conflict that only lost the dead branch is no problem, and one that changed more still is.
    gated = COPY.replace("    b = 2\n", '    if vllm_version_is("0.9.0"):\n        b = 0\n    else:\n        b = 2\n')
    assert gated != COPY
    retired = COPY
    live = gated.replace('"0.9.0"', '"1.1.0"')  # a gate naming B: live, and kept
    for tree, problem in ((retired, False), (RESYNCED, True)):
        made = copies.CopyInput(
            "plug/sched.py", 2, "vllm.core.Scheduler.step", ast.parse(BASE).body[0], ast.parse(THEIRS).body[0],
            _module(gated), None, _module(tree), "conflict", "v1.1.0",
        )  # fmt: skip
        row = copies.judge(made)
        assert row is not None and bool(row.problems) is problem, (tree, row.problems)
    kept = copies.CopyInput(
        "plug/sched.py", 2, "vllm.core.Scheduler.step", ast.parse(BASE).body[0], ast.parse(THEIRS).body[0],
        _module(live), None, _module(retired), "conflict", "v1.1.0",
    )  # fmt: skip
    row = copies.judge(kept)
    assert row is not None and row.problems  # B's own gate is live: folding it away is a change

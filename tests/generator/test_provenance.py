"""The pieces under `migrate`: code patterns, statements and the release scan, the cap check in words."""

from __future__ import annotations

import ast
import itertools
import textwrap
from pathlib import Path

import pytest

from generator.builder import astpattern
from generator.judge import capcheck, provenance

RELEASES = [
    provenance.Release(p.stem, p.read_text())
    for p in sorted((Path(__file__).parent / "data" / "migrate" / "releases").glob("v*.py"))
]


def _stmts(code: str) -> list[ast.stmt]:
    return ast.parse(textwrap.dedent(code)).body


@pytest.mark.parametrize(
    ("pattern", "code", "captured"),
    [
        ("if GATE:\n    break", "if a == b:\n    break", {"GATE": "a == b"}),
        ("return super().schedule(*ARGS, **KWARGS)", "return super().schedule()", {"ARGS": "", "KWARGS": ""}),
        ("return super().schedule(*ARGS, **KWARGS)", "return super().schedule(x, y=y)", {"ARGS": "x", "KWARGS": "y=y"}),
        ("if c:\n    BODY\n    return 1", "if c:\n    return 1", {"BODY": ""}),
        ("if c:\n    BODY\n    return 1", "if c:\n    a = 1\n    b()\n    return 1", {"BODY": "a = 1\nb()"}),
        ("x = SAME + SAME", "x = f(1) + f(1)", {"SAME": "f(1)"}),
    ],
)
def test_patterns_match_and_capture(pattern: str, code: str, captured: dict[str, str]) -> None:
    found = astpattern.match_run(pattern, _stmts(code), 0)
    assert found is not None

    def shown(value: astpattern.Captured) -> str:
        if isinstance(value, list):
            return "\n".join(ast.unparse(v) for v in value)
        return ast.unparse(value)

    assert {k: shown(v) for k, v in found.items()} == captured


@pytest.mark.parametrize(
    ("pattern", "code"),
    [
        ("if GATE:\n    break", "if a == b:\n    continue"),  # another body
        ("if GATE:\n    break", "if a == b:\n    break\nelse:\n    pass"),  # an else the pattern lacks
        ("if c:\n    BODY\n    return 1", "if c:\n    return 2"),  # the fixed tail differs
        ("x = SAME + SAME", "x = f(1) + f(2)"),  # one placeholder, two codes
        ("balance_flag = GATE\nif balance_flag:\n    break", "balance_flag = a\nif other:\n    break"),
        ("if GATE:\n    break", ""),  # nothing left in the block
    ],
)
def test_patterns_refuse_anything_else(pattern: str, code: str) -> None:
    assert astpattern.match_run(pattern, _stmts(code), 0) is None


def test_two_run_placeholders_in_one_list_are_a_pattern_error() -> None:
    with pytest.raises(ValueError, match="at most one run placeholder"):
        astpattern.match_run("f(*ARGS, *MORE)", _stmts("f(1, 2)"), 0)


def _method(code: str) -> provenance.Method:
    func = _stmts(code)[0]
    assert isinstance(func, ast.FunctionDef)
    return provenance.reduce(func)


def test_statements_ignore_formatting_and_comments_but_not_depth_or_code() -> None:
    a = _method("def f(self):\n    if x:\n        y = (1 +\n  2)  # note\n    return y\n")
    b = _method("def f(self):\n    if x:\n        y = 1 + 2\n    return y\n")
    c = _method("def f(self):\n    if x:\n        y = 1 + 2\n        return y\n")
    d = _method("def f(self, z):\n    if x:\n        y = 1 + 2\n    return y\n")
    assert a.keys == b.keys
    assert len({b.keys, c.keys, d.keys}) == 3
    # A compound statement is its header: one changed line in a big block is one statement.
    assert provenance.distance(b, _method("def f(self):\n    if x:\n        y = 3\n    return y\n")) == 1


def test_an_added_stop_is_placed_where_it_was_added() -> None:
    """`if b: break` added after `if a: break` is reported at its own lines, not as `break` + `if b:`."""
    upstream = _method("def f(self):\n    while w:\n        if a:\n            break\n        g()\n")
    copy = _method(
        "def f(self):\n    while w:\n        if a:\n            break\n        if b:\n            break\n        g()\n"
    )
    (edit,) = provenance.edits(copy, upstream)
    assert edit.describe("vX") == "lines 5-6 added: `if b:` (+1 more)"


def test_locate_finds_every_identical_release_and_the_closest_with_ties_broken_near_the_tag() -> None:
    v120 = provenance.upstream_method(RELEASES[2].text)
    found = provenance.locate(v120, RELEASES, "v1.0.0")
    assert (found.tags, found.exact, found.differing) == (("v1.2.0", "v1.2.1"), True, 0)
    # One statement off v1.2.0 (and so off v1.2.1 too): the tie goes to the release nearest the tag.
    func = provenance.upstream_function(RELEASES[2].text.replace("token_budget -= request.num_tokens", "pass"))
    changed = provenance.reduce(func)
    assert provenance.locate(changed, RELEASES, "v1.2.1").tags == ("v1.2.1",)
    assert provenance.locate(changed, RELEASES, "v1.0.0").tags == ("v1.2.0",)
    assert provenance.locate(changed, RELEASES, "v1.2.1").differing == 1


def test_the_pruned_distance_never_changes_the_answer() -> None:
    methods = [provenance.upstream_method(r.text) for r in RELEASES]
    for a, b in itertools.product(methods, repeat=2):
        exact = provenance.distance(a, b)
        assert exact is not None
        for bound in range(exact + 3):
            pruned = provenance.distance(a, b, bound)
            assert pruned == (exact if exact <= bound else None)


def test_releases_between_counts_in_release_order() -> None:
    assert provenance.releases_between(RELEASES, "v1.0.0", "v1.2.1") == 3
    assert provenance.releases_between(RELEASES, "v1.2.1", "v1.1.0") == -2
    assert provenance.releases_between(RELEASES, "v1.0.0", "v9.9.9") is None


@pytest.mark.parametrize(
    ("release", "expected"),
    [
        ("v1.0.0", ("len(self.running)", "==", "self.max_num_running_reqs")),
        ("v1.2.0", ("len(self.running) + self.num_waiting_for_streaming_input", ">=", "self.max_num_running_reqs")),
    ],
)
def test_cap_check_is_read_through_the_assignment(release: str, expected: tuple[str, str, str]) -> None:
    text = next(r.text for r in RELEASES if r.tag == release)
    found = capcheck.find(provenance.upstream_function(text))
    assert found is not None and (found.count, found.operator, found.cap) == expected


def test_a_cap_check_of_an_unknown_shape_is_not_guessed() -> None:
    text = next(r.text for r in RELEASES if r.tag == "v1.1.0").replace("== self.max_num_running_reqs", "> self.cap")
    assert capcheck.find(provenance.upstream_function(text)) is None


def test_differences_in_words() -> None:
    upstream = capcheck.CapCheck(
        "len(self.running) + self.num_waiting_for_streaming_input", ">=", "self.max_num_active_reqs"
    )
    found = capcheck.differences(upstream, "len(self.running) + self.num_paused", "==", "self.max_num_running_reqs")
    assert [d.short for d in found] == [
        "misses streaming slots",
        "also counts `self.num_paused`",
        "`==` where upstream has `>=`",
        "`self.max_num_running_reqs` where upstream has `self.max_num_active_reqs`",
    ]
    assert found[0].sentence("up", "ours", {"lacks": "it misses {what}"}) == (
        "up counts streaming slots (`self.num_waiting_for_streaming_input`), ours does not: it misses streaming slots"
    )
    assert capcheck.differences(upstream, None, ">=", "self.max_num_active_reqs") == []

"""The statement-level three-way merge of one copy: each case writes A, B and the copy and knows the answer."""

from __future__ import annotations

import ast
import subprocess
import textwrap
from pathlib import Path

import pytest

from generator.judge.resync import Conflict, Merged, Redundant, Unchanged, resync
from generator.judge.resync.check import problems

BASE = """\
    def step(self, batch):
        total = 0
        for req in batch:
            total += req.tokens
        if total > self.budget:
            raise ValueError("over budget")
        return total
"""


def _d(text: str) -> str:
    return textwrap.dedent(text) if not text.startswith("    ") else text


def _merged(base: str, ours: str, theirs: str) -> str:
    result = resync(base, ours, theirs)
    assert isinstance(result, Merged), result
    return result.text


def test_clean_merge_keeps_the_copys_comment_and_takes_upstreams_change() -> None:
    ours = BASE.replace("        total = 0\n", "        total = 0\n        # ascend: count the prefill too\n")
    ours = ours.replace("            total += req.tokens\n", "            total += req.tokens + req.prefill\n")
    theirs = BASE.replace('raise ValueError("over budget")', 'raise RuntimeError("over budget")')
    want = ours.replace('raise ValueError("over budget")', 'raise RuntimeError("over budget")')
    assert _merged(BASE, ours, theirs) == want


def test_edit_next_to_a_change_both_go_in() -> None:
    # The copy adds a statement right after the one upstream rewrote: neither touches the other's statement.
    ours = BASE.replace("        return total\n", "        self.seen += 1\n        return total\n")
    theirs = BASE.replace(
        '        if total > self.budget:\n            raise ValueError("over budget")\n',
        "        total = min(total, self.budget)\n",
    )
    want = (
        "    def step(self, batch):\n        total = 0\n        for req in batch:\n            total += req.tokens\n"
        "        total = min(total, self.budget)\n        self.seen += 1\n        return total\n"
    )
    assert _merged(BASE, ours, theirs) == want


def test_edit_inside_a_changed_block_merges_inside_it() -> None:
    # Upstream changed the loop's header; the copy changed a statement in its body.
    ours = BASE.replace("total += req.tokens", "total += req.tokens  # ascend: tokens only")
    ours = ours.replace("total += req.tokens  #", "total += int(req.tokens)  #")
    theirs = BASE.replace("for req in batch:", "for req in batch.requests:")
    want = ours.replace("for req in batch:", "for req in batch.requests:")
    assert _merged(BASE, ours, theirs) == want


def test_a_statement_both_sides_changed_is_a_conflict_with_all_three_shown() -> None:
    ours = BASE.replace("total += req.tokens", "total += req.tokens * 2")
    theirs = BASE.replace("total += req.tokens", "total += req.num_tokens")
    result = resync(BASE, ours, theirs)
    assert isinstance(result, Conflict)
    assert "req.tokens\n" in result.base and "* 2" in result.ours and "num_tokens" in result.theirs
    assert result.line == 4


def test_upstream_unchanged_and_redundant_copies_are_not_merged() -> None:
    ours = BASE.replace("total = 0", "total = 1")
    assert isinstance(resync(BASE, ours, BASE), Unchanged)
    theirs = BASE.replace("total = 0", "total = 1")
    assert isinstance(resync(BASE, theirs, theirs), Redundant)


def test_upstream_statement_goes_in_at_the_copys_indentation() -> None:
    # The copy is a top-level function (no class), upstream's a method: its new statement is re-indented.
    ours = textwrap.dedent(BASE).replace("return total", "return total  # ours")
    theirs = BASE.replace("        return total\n", "        self.last = total\n        return total\n")
    want = ours.replace("    return total  # ours\n", "    self.last = total\n    return total  # ours\n")
    assert _merged(BASE, ours, theirs) == want


def test_a_copy_with_two_statements_on_a_line_is_not_merged_by_guess() -> None:
    ours = BASE.replace("        total = 0\n", "        total = 0; seen = 0\n")
    theirs = BASE.replace("return total", "return int(total)")
    assert isinstance(resync(BASE, ours, theirs), Conflict)


def test_a_copy_that_does_not_parse_is_a_conflict() -> None:
    theirs = BASE.replace("return total", "return int(total)")
    assert isinstance(resync(BASE, BASE.replace("return total", "return (total"), theirs), Conflict)


def test_the_check_refuses_a_result_missing_one_of_upstreams_changes() -> None:
    ours = BASE.replace("total = 0", "total = 1")
    theirs = BASE.replace("return total", "return int(total)")
    assert problems(BASE, ours, theirs, ours) != ""  # the copy alone lacks B's change
    assert problems(BASE, ours, theirs, theirs) != ""  # B alone lacks the copy's edit
    both = ours.replace("return total", "return int(total)")
    assert problems(BASE, ours, theirs, both) == ""
    # B removed the budget check; a result that kept it is refused.
    gone = BASE.replace('        if total > self.budget:\n            raise ValueError("over budget")\n', "")
    assert problems(BASE, BASE, gone, BASE) != ""


def _git_merge_file(tmp_path: Path, base: str, ours: str, theirs: str) -> str | None:
    files = []
    for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
        (tmp_path / name).write_text(text)
        files.append(str(tmp_path / name))
    done = subprocess.run(["git", "merge-file", "-p", *files], capture_output=True, text=True, check=False)
    return done.stdout if done.returncode == 0 else None


def test_the_text_baseline_conflicts_where_the_statement_merge_does_not(tmp_path: Path) -> None:
    # An edit one line away from upstream's change: git merge-file's hunks touch, the statements do not.
    ours = BASE.replace("total += req.tokens", "total += req.tokens + 1")
    theirs = BASE.replace("for req in batch:", "for req in batch.requests:")
    assert _git_merge_file(tmp_path, BASE, ours, theirs) is None
    merged = _merged(BASE, ours, theirs)
    ast.parse(textwrap.dedent(merged))
    assert "batch.requests" in merged and "req.tokens + 1" in merged


@pytest.mark.parametrize("decorated", [False, True])
def test_a_changed_signature_with_an_untouched_def_line_is_taken(decorated: bool) -> None:
    top = "    @staticmethod\n" if decorated else ""
    base = top + BASE
    ours = base.replace("total = 0", "total = 0  # ours")
    theirs = base.replace("def step(self, batch):", "def step(self, batch, *, budget=None):")
    want = ours.replace("def step(self, batch):", "def step(self, batch, *, budget=None):")
    assert _merged(base, ours, theirs) == want


def test_a_signature_over_several_lines_is_replaced_whole() -> None:
    base = "def plan(\n    batch,\n    budget,\n):\n    # why: the first statement's comment\n    return len(batch)\n"
    ours = base.replace("return len(batch)", "return len(batch) - 1")
    theirs = base.replace("    budget,\n):", "    budget: int,\n    *,\n    strict: bool = False,\n) -> int:")
    want = theirs.replace("return len(batch)", "return len(batch) - 1")
    assert _merged(base, ours, theirs) == want


def test_a_monkeypatch_assignment_to_a_moved_path_is_left_and_reported() -> None:
    from generator.tree.adapt.names import rewrite

    text = "import vllm.a\n\nvllm.a.Name = mine  # plugin\nvllm.a.Name.run()\n"
    new, rewrites, left = rewrite(text, {"vllm.a.Name": ("vllm.b", "Name")})
    assert new == "import vllm.a\nimport vllm.b\n\nvllm.a.Name = mine  # plugin\nvllm.b.Name.run()\n"
    assert [(r.line, r.kind) for r in rewrites] == [(4, "attribute")]
    assert [(x.line, x.name) for x in left] == [(3, "vllm.a.Name")]

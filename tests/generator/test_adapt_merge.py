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


def test_an_import_of_a_module_that_moved_whole_under_a_version_guard_is_kept_for_a() -> None:
    from generator.tree.adapt.names import rewrite

    moves = {"vllm.a.mod": ("vllm.b.mod", "")}  # the module itself moved: no qualified name in it
    guarded = "try:\n    import vllm.b.mod as m\nexcept ImportError:\n    import vllm.a.mod as m  # vLLM A\n"
    new, rewrites, left = rewrite(guarded, moves)
    assert new == guarded and not rewrites
    assert [(x.line, x.name, x.kind) for x in left] == [(4, "vllm.a.mod", "guarded")]
    plain = "import vllm.a.mod as m  # vLLM A\nfrom vllm.a import mod\n"
    new, rewrites, left = rewrite(plain, moves)
    assert new == "import vllm.b.mod as m  # vLLM A\nfrom vllm.b import mod\n" and not left
    assert [(r.line, r.old, r.new) for r in rewrites] == [
        (1, "vllm.a.mod", "vllm.b.mod"),
        (2, "vllm.a.mod", "vllm.b.mod"),
    ]


# Compound statements with more than one block: each block merged by the same rule.

BRANCHY = """\
    def admit(self, req):
        if req.prefill:
            budget = self.prefill_budget
            req.stage = "prefill"
        elif req.spec:
            budget = self.spec_budget
        else:
            budget = self.decode_budget
            req.stage = "decode"
        try:
            slot = self.pool.take(budget)
            self.count += 1
        except KeyError as exc:
            # no slot left: wait
            self.waiting.append(req)
            raise
        except ValueError:
            return None
        else:
            self.running.append(req)
        finally:
            self.tick()
        for other in self.running:
            other.age += 1
        else:
            self.last = req
        return slot
"""


@pytest.mark.parametrize(
    ("mine", "upstream"),
    [
        # an edit in the if's body, upstream's change in its else block
        (
            ("budget = self.prefill_budget", "budget = self.prefill_budget * 2"),
            ('req.stage = "decode"', "req.stage = 2"),
        ),
        # an edit in the elif's body, upstream's change to the if's test
        (("budget = self.spec_budget", "budget = self.spec_budget + 1"), ("if req.prefill:", "if req.is_prefill:")),
        # an edit to the elif's test, upstream's change in the else block
        (("elif req.spec:", "elif req.spec and self.spec:"), ('req.stage = "decode"', "req.stage = 2")),
        # an edit in the try's body, upstream's change in one handler's body
        (("self.count += 1", "self.count += 2"), ("self.waiting.append(req)", "self.waiting.appendleft(req)")),
        # an edit to a handler's header, upstream's change in the finally block
        (("except ValueError:", "except (ValueError, TypeError):"), ("self.tick()", "self.tick(req)")),
        # an edit in the try's else block, upstream's change in another handler's body
        (("self.running.append(req)", "self.running.insert(0, req)"), ("return None", "return slot")),
        # an edit in the for's else block, upstream's change in its body
        (("self.last = req", "self.last = other"), ("other.age += 1", "other.age += 2")),
    ],
)
def test_both_sides_inside_one_compound_statement_merge_block_by_block(
    mine: tuple[str, str], upstream: tuple[str, str]
) -> None:
    ours, theirs = BRANCHY.replace(*mine), BRANCHY.replace(*upstream)
    assert ours != BRANCHY and theirs != BRANCHY
    assert _merged(BRANCHY, ours, theirs) == ours.replace(*upstream)


def test_upstream_adds_an_else_block_the_copy_lacks_at_the_copys_indentation() -> None:
    # The copy is a top-level function; upstream's method gains an else block on the for loop.
    base = BRANCHY.replace("        else:\n            self.last = req\n", "")
    ours = textwrap.dedent(base).replace("return slot", "return slot  # ours")
    theirs = base.replace(
        "            other.age += 1\n", "            other.age += 1\n        else:\n            self.idle = True\n"
    )
    want = ours.replace("        other.age += 1\n", "        other.age += 1\n    else:\n        self.idle = True\n")
    assert _merged(base, ours, theirs) == want


def test_upstream_removes_a_finally_block_the_copy_edited_elsewhere() -> None:
    ours = BRANCHY.replace("self.count += 1", "self.count += 1  # ascend")
    ours = ours.replace("self.count += 1  #", "self.count += 3  #")
    theirs = BRANCHY.replace("        finally:\n            self.tick()\n", "")
    assert _merged(BRANCHY, ours, theirs) == ours.replace("        finally:\n            self.tick()\n", "")


def test_a_comment_above_an_else_line_stays_the_copys() -> None:
    ours = BRANCHY.replace(
        "        else:\n            budget", "        # ascend: decode last\n        else:\n            budget"
    )
    ours = ours.replace("budget = self.decode_budget", "budget = self.decode_budget or 1")
    theirs = BRANCHY.replace('req.stage = "prefill"', 'req.stage = "prefill"\n            req.seen = True')
    assert _merged(BRANCHY, ours, theirs) == ours.replace(
        'req.stage = "prefill"', 'req.stage = "prefill"\n            req.seen = True'
    )


def test_one_statement_both_sides_changed_inside_a_handler_is_a_conflict() -> None:
    ours = BRANCHY.replace("return None", "return -1")
    theirs = BRANCHY.replace("return None", "return 0")
    result = resync(BRANCHY, ours, theirs)
    assert isinstance(result, Conflict)
    assert "None" in result.base and "-1" in result.ours and "0" in result.theirs
    assert result.line == ours.splitlines().index("            return -1") + 1


def test_a_header_both_sides_changed_differently_is_a_conflict() -> None:
    ours = BRANCHY.replace("except KeyError as exc:", "except LookupError as exc:")
    ours = ours.replace("self.count += 1", "self.count += 2")
    theirs = BRANCHY.replace("except KeyError as exc:", "except KeyError:")
    assert isinstance(resync(BRANCHY, ours, theirs), Conflict)


def test_elif_on_one_side_and_else_if_on_the_other_is_not_lined_up_by_guess() -> None:
    ours = BRANCHY.replace("        elif req.spec:\n            budget = self.spec_budget\n        else:\n", "")
    ours = ours.replace(
        '            budget = self.prefill_budget\n            req.stage = "prefill"\n',
        '            budget = self.prefill_budget\n            req.stage = "prefill"\n        else:\n'
        "            if req.spec:\n                budget = self.spec_budget\n            else:\n"
        "                budget = self.decode_budget\n"
        '                req.stage = "decode"\n',
    )
    ours = ours.replace(
        '            budget = self.decode_budget\n            req.stage = "decode"\n        try', "        try"
    )
    assert ast.dump(ast.parse(textwrap.dedent(ours))) == ast.dump(ast.parse(textwrap.dedent(BRANCHY)))
    ours = ours.replace("self.spec_budget", "self.spec_budget + 1")
    theirs = BRANCHY.replace("if req.prefill:", "if req.is_prefill:")
    result = resync(BRANCHY, ours, theirs)
    assert isinstance(result, Conflict)
    assert (result.base, result.ours, result.theirs) == (
        "        if req.prefill:\n",
        "        if req.prefill:\n",
        "        if req.is_prefill:\n",
    )


def test_the_check_refuses_a_change_merged_into_the_wrong_block() -> None:
    # A naive recursion that lines the if's body up with its else block would put upstream's change
    # into the body: the statements are the same kinds, only the block differs.
    base = "def f(x):\n    if x:\n        y = 1\n    else:\n        y = 1\n    return y\n"
    ours = base.replace("    return y\n", "    return y + 0\n")
    theirs = base.replace("    else:\n        y = 1\n", "    else:\n        y = 2\n")
    wrong = ours.replace("    if x:\n        y = 1\n", "    if x:\n        y = 2\n")
    assert problems(base, ours, theirs, wrong) != ""
    right = ours.replace("    else:\n        y = 1\n", "    else:\n        y = 2\n")
    assert problems(base, ours, theirs, right) == ""
    assert _merged(base, ours, theirs) == right


def test_statements_changed_in_a_row_pair_up_so_upstreams_change_to_one_of_them_merges_inside() -> None:
    # The copy changed two statements in a row (difflib's one replaced run); upstream changed the second's header.
    ours = BASE.replace("total = 0", "total = 1").replace("total += req.tokens", "total += req.tokens + 1")
    theirs = BASE.replace("for req in batch:", "for req in batch.requests:")
    assert _merged(BASE, ours, theirs) == ours.replace("for req in batch:", "for req in batch.requests:")


def test_upstream_reading_a_local_the_copy_removed_is_refused() -> None:
    # Statement for statement the two sides do not touch; the result would read a name nothing binds.
    base = "def f(self, batch):\n    pool = self.pool\n    n = len(batch)\n    return n\n"
    ours = base.replace("    pool = self.pool\n", "")
    theirs = base.replace("return n", "return min(n, pool.free)")
    naive = "def f(self, batch):\n    n = len(batch)\n    return min(n, pool.free)\n"
    assert "pool" in problems(base, ours, theirs, naive)
    result = resync(base, ours, theirs)
    assert isinstance(result, Conflict) and "pool" in result.reason
    # The same change when the copy keeps its own binding of the name merges.
    kept = base.replace("    pool = self.pool\n", "    pool = self.npu_pool\n")
    assert _merged(base, kept, theirs) == kept.replace("return n", "return min(n, pool.free)")


def test_a_new_if_before_a_changed_one_pairs_the_old_if_by_its_test() -> None:
    # Upstream adds an `if` before the one it changes (one replaced run); the copy changed the old one's test.
    base = "def f(a, b, c):\n    if a:\n        x = 1\n    return x\n"
    ours = base.replace("if a:", "if a and b:")
    theirs = base.replace("    if a:\n        x = 1\n", "    if c:\n        return 0\n    if a:\n        x = 2\n")
    want = "def f(a, b, c):\n    if c:\n        return 0\n    if a and b:\n        x = 2\n    return x\n"
    assert _merged(base, ours, theirs) == want


def test_the_same_change_on_both_sides_inside_an_else_block_goes_in_once() -> None:
    both = ("budget = self.decode_budget", "budget = self.decode_budget // 2")
    ours = BRANCHY.replace(*both).replace("self.count += 1", "self.count += 2")
    theirs = BRANCHY.replace(*both).replace("if req.prefill:", "if req.is_prefill:")
    assert _merged(BRANCHY, ours, theirs) == ours.replace("if req.prefill:", "if req.is_prefill:")


def test_an_edit_at_a_blocks_end_and_an_insertion_after_its_statement_both_go_in() -> None:
    # Flat, both insert at one place; in blocks, the copy's is inside the `if` and upstream's after it.
    base = "def f(x):\n    if x:\n        a()\n    b()\n"
    ours = base.replace("        a()\n", "        a()\n        c()  # ours\n")
    theirs = base.replace("    b()\n", "    d()\n    b()\n")
    right = "def f(x):\n    if x:\n        a()\n        c()  # ours\n    d()\n    b()\n"
    assert _merged(base, ours, theirs) == right
    inside = "def f(x):\n    if x:\n        a()\n        c()  # ours\n        d()\n    b()\n"
    before = "def f(x):\n    if x:\n        a()\n    d()\n    c()  # ours\n    b()\n"
    assert problems(base, ours, theirs, inside) != ""
    assert problems(base, ours, theirs, before) != ""
    assert problems(base, ours, theirs, right) == ""


def test_two_insertions_at_one_place_in_one_block_stay_a_conflict() -> None:
    # Block by block they still meet: which goes first is a person's call.
    base = "def f(x):\n    if x:\n        a()\n    b()\n"
    ours = base.replace("        a()\n", "        a()\n        c()\n")
    theirs = base.replace("        a()\n", "        a()\n        d()\n")
    for order in ("c()\n        d()", "d()\n        c()"):
        assert problems(base, ours, theirs, base.replace("a()\n", f"a()\n        {order}\n")) != ""
    result = resync(base, ours, theirs)
    assert isinstance(result, Conflict)


def test_a_with_the_copy_changed_in_a_replaced_run_takes_upstreams_statements_around_its_call() -> None:
    # The copy changed the call inside the `with` and the statement after it (difflib's one replaced
    # run); upstream timed the call. The `with` is the only one in the run on every side: it pairs.
    base = (
        "def load(self, cfg):\n    with dev:\n        model = self.create(cfg)\n"
        '    log("loading")\n    self.load_weights(model)\n    return model\n'
    )
    ours = base.replace("self.create(cfg)", "init(cfg)  # ours").replace('log("loading")', "attach(model)")
    theirs = base.replace(
        "        model = self.create(cfg)\n",
        "        t0 = now()\n        model = self.create(cfg)\n        log_time(t0)\n",
    )
    right = (
        "def load(self, cfg):\n    with dev:\n        t0 = now()\n        model = init(cfg)  # ours\n"
        "        log_time(t0)\n    attach(model)\n    self.load_weights(model)\n    return model\n"
    )
    assert _merged(base, ours, theirs) == right
    outside = right.replace("        log_time(t0)\n    attach(model)\n", "    attach(model)\n    log_time(t0)\n")
    assert problems(base, ours, theirs, outside) != ""


def test_upstream_moving_a_statement_the_copy_removed_does_not_bring_it_back() -> None:
    # In sequence: the same deletion on both sides, and upstream's insertion elsewhere. Counted, the
    # merge would undo the copy's removal; no combination of the two sides holds it.
    body = ["a()", "self.sync()", "b1()", "b2()", "b3()", "return c()"]
    base = "def f(self):\n" + "".join(f"    {line}\n" for line in body)
    ours = base.replace("    self.sync()\n", "")
    theirs = base.replace("    self.sync()\n", "").replace("    return c()\n", "    self.sync()\n    return c()\n")
    back = ours.replace("    return c()\n", "    self.sync()\n    return c()\n")
    assert "self.sync()" in problems(base, ours, theirs, back)
    result = resync(base, ours, theirs)
    assert isinstance(result, Conflict) and "self.sync()" in result.reason


def test_upstream_turning_an_if_into_the_else_of_another_is_no_merge_when_the_copy_removed_it() -> None:
    # The copy removed the second branch; upstream made it the first one's `else`. Read by blocks, both
    # delete the second `if` and upstream adds an else: the branch the copy removed would come back.
    base = (
        "def parse(x, y):\n    if x is not None:\n        return wrap(x)\n"
        "    if y is not None:\n        return embed(y)\n"
    )
    ours = base.replace("    if y is not None:\n        return embed(y)\n", "").replace("wrap(x)", "wrap(check(x))")
    theirs = base.replace("    if y is not None:\n", "    else:\n")
    result = resync(base, ours, theirs)
    assert isinstance(result, Conflict) and "embed(y)" in result.reason


def test_a_return_each_side_added_in_its_own_place_both_go_in() -> None:
    # Counted, `return` went 0 -> 1 on both sides: one change or two, only the sequences can say.
    base = "def f(self, x):\n    if x.a:\n        self.a()\n    self.b()\n"
    ours = base.replace("    if x.a:\n", "    if x.skip:\n        return\n    if x.a:\n")
    theirs = base.replace("    self.b()\n", "    if x.done:\n        return\n    self.b()\n")
    want = ours.replace("    self.b()\n", "    if x.done:\n        return\n    self.b()\n")
    assert _merged(base, ours, theirs) == want


# A copy taken before vLLM respelled its annotations (``Optional[X]`` -> ``X | None``, ``List`` -> ``list``).
SPELLED_A = """\
    def pick(self, reqs: list[int], limit: int | None = None) -> int | None:
        chosen = self.policy.first(reqs)
        return chosen
"""
SPELLED_COPY = """\
    def pick(self, reqs: List[int], limit: Optional[int] = None) -> Optional[int]:
        chosen = self.policy.first(reqs)  # ascend: policy decides
        self.npu_stats.record(chosen)
        return chosen
"""


def test_a_copy_spelling_optional_takes_upstreams_new_parameter_and_keeps_its_own_edit() -> None:
    theirs = SPELLED_A.replace("limit: int | None = None)", "limit: int | None = None, *, strict: bool = False)")
    theirs = theirs.replace("return chosen", "return chosen if strict or chosen else None")
    want = (
        "    def pick(self, reqs: list[int], limit: int | None = None, *, strict: bool = False) -> int | None:\n"
        "        chosen = self.policy.first(reqs)  # ascend: policy decides\n"
        "        self.npu_stats.record(chosen)\n"
        "        return chosen if strict or chosen else None\n"
    )
    assert _merged(SPELLED_A, SPELLED_COPY, theirs) == want


def test_upstream_respelling_its_annotations_is_no_change_and_the_copy_keeps_its_spelling() -> None:
    respelled_a = SPELLED_A.replace("list[int]", "List[int]").replace("int | None", "Optional[int]")
    assert isinstance(resync(respelled_a, SPELLED_COPY, SPELLED_A), Unchanged)
    theirs = SPELLED_A.replace("return chosen", "return chosen or None")
    assert _merged(respelled_a, SPELLED_COPY, theirs) == SPELLED_COPY.replace(
        "return chosen\n", "return chosen or None\n"
    )


def test_optional_in_code_is_code_a_statement_both_sides_changed_stays_a_conflict() -> None:
    base = "    def pick(self, x):\n        y = cast(int | None, x)\n        return y\n"
    ours = base.replace("cast(int | None, x)", "cast(Optional[int], x)")
    theirs = base.replace("cast(int | None, x)", "cast(int | None, x) or 0")
    assert isinstance(resync(base, ours, theirs), Conflict)


def test_a_respelled_annotation_hides_no_change_of_its_meaning_from_the_check() -> None:
    theirs = SPELLED_A.replace("limit: int | None = None", "limit: int = 0")
    # The copy's `Optional[int]` means A's `int | None`: upstream's change to `int` must go in.
    assert "limit: int = 0" in _merged(SPELLED_A, SPELLED_COPY, theirs)
    assert problems(SPELLED_A, SPELLED_COPY, theirs, SPELLED_COPY)


def test_an_empty_union_is_left_as_written_and_merges_like_any_annotation() -> None:
    base = "    def f(self, x: Union[()]):\n        a = 1\n        return a\n"
    ours = base.replace("a = 1", "a = 2")
    theirs = base.replace("return a", "return a + 1")
    assert _merged(base, ours, theirs) == "    def f(self, x: Union[()]):\n        a = 2\n        return a + 1\n"

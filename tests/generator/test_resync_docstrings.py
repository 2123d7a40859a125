"""A docstring both sides changed is the copy's: each case writes A, B and the copy and knows the answer."""

from __future__ import annotations

from generator.judge.resync import Conflict, Merged, resync

BASE = '''\
    def step(self, batch):
        """Count the batch's tokens.

        Raises when over budget.
        """
        total = sum(req.tokens for req in batch)
        if total > self.budget:
            raise ValueError("over budget")
        return total
'''
B_DOC = '''\
        """Count the tokens of a batch.

        Raises ValueError when the total is over the budget.
        """
'''
A_DOC = '''\
        """Count the batch's tokens.

        Raises when over budget.
        """
'''
OUR_DOC = '''\
        """Ascend: count prefill and decode tokens alike."""
'''


def _theirs() -> str:
    return BASE.replace(A_DOC, B_DOC).replace("raise ValueError", "raise RuntimeError")


def test_both_reworded_the_docstring_the_copys_stays_and_every_other_change_of_b_goes_in() -> None:
    ours = BASE.replace(A_DOC, OUR_DOC).replace("        return total\n", "        return total + 0  # ascend\n")
    want = ours.replace("raise ValueError", "raise RuntimeError")
    result = resync(BASE, ours, _theirs())
    assert isinstance(result, Merged), result
    assert result.text == want


def test_the_copy_dropped_the_docstring_that_b_reworded_it_stays_dropped() -> None:
    ours = BASE.replace(A_DOC, "").replace("        return total\n", "        return total + 0  # ascend\n")
    result = resync(BASE, ours, _theirs())
    assert isinstance(result, Merged), result
    assert result.text == ours.replace("raise ValueError", "raise RuntimeError")


def test_a_docstring_only_b_reworded_is_b_s() -> None:
    ours = BASE.replace("        return total\n", "        return total + 0  # ascend\n")
    result = resync(BASE, ours, _theirs())
    assert isinstance(result, Merged), result
    assert result.text == ours.replace(A_DOC, B_DOC).replace("raise ValueError", "raise RuntimeError")


def test_both_added_a_docstring_where_a_had_none_the_copys_stays() -> None:
    base = BASE.replace(A_DOC, "")
    ours = base.replace("    def step(self, batch):\n", "    def step(self, batch):\n" + OUR_DOC)
    theirs = base.replace("    def step(self, batch):\n", "    def step(self, batch):\n" + B_DOC)
    theirs = theirs.replace("raise ValueError", "raise RuntimeError")
    result = resync(base, ours, theirs)
    assert isinstance(result, Merged), result
    assert result.text == ours.replace("raise ValueError", "raise RuntimeError")


def test_a_code_statement_both_changed_is_still_a_conflict_next_to_the_docstrings() -> None:
    ours = BASE.replace(A_DOC, OUR_DOC).replace("raise ValueError", "raise OverflowError")
    assert isinstance(resync(BASE, ours, _theirs()), Conflict)


def test_a_copy_indented_unlike_b_is_not_given_its_docstring_line_for_line() -> None:
    # the copy is a module function, B's a method: its docstring's lines would be B's body's at another depth
    ours = "\n".join(line[4:] for line in BASE.replace(A_DOC, OUR_DOC).splitlines()) + "\n"
    assert isinstance(resync(BASE, ours, _theirs()), Conflict)


def test_the_copy_put_a_statement_where_the_docstring_was_and_b_reworded_it_both_go_in() -> None:
    branch = "        if not batch:  # ascend: an empty step\n            return 0\n"
    ours = BASE.replace(A_DOC, branch)
    result = resync(BASE, ours, _theirs())
    assert isinstance(result, Merged), result
    assert result.text == ours.replace("raise ValueError", "raise RuntimeError")

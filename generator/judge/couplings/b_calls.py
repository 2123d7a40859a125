"""B's own calls of the definitions the tree's functions stand in for, asked together for one run of ``impact``.

An override or a patch's function is asked about only where B's signature of what it replaces differs from
A's (B's callers pass what A's did not); every name asked is read in both releases' files in one pass
(``calls.CallIndex.prepare``), and only for what the judgement cache does not keep.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable

from generator.judge.couplings import calls, passing, verdicts
from generator.judge.couplings.changes import Change
from generator.judge.couplings.judged import Judged
from generator.judge.couplings.record import Coupling
from generator.judge.couplings.signatures import Receiver
from generator.judge.couplings.sites import TreeClass
from generator.judge.couplings.upstream import Definition, Resolver

# What one coupling asks: its memo key, the change, the tree's function, its owner (B's class of a method), a
# patch or not, and for an override the tree's class.
_Asked = tuple[Hashable, Change, Receiver, str | None, bool, TreeClass | None]


class BCalls:
    """B's own calls of each definition a tree's function replaces that the function refuses (``calls``),
    asked together so both releases' files are read once for every name, and only for what is not kept."""

    def __init__(
        self, a: Resolver, b: Resolver, memo: Judged, replaced: Callable[[TreeClass], frozenset[tuple[str, str]]]
    ) -> None:
        self.a, self.b, self.memo = a, b, memo
        self.asked: dict[tuple[str, str], _Asked] = {}
        self.indexes: tuple[calls.CallIndex, calls.CallIndex] | None = None
        # For an override: (B's class, method) its class replaces without calling B's, where a call B makes
        # never runs for its objects (``judging.replaced``, read when first needed)
        self._replaced = replaced

    def ask(self, c: Coupling, change: Change, receiver: Receiver, owner_class: TreeClass | None = None) -> None:
        """Only where B's signature of the definition differs from A's: B's callers pass what A's did not."""
        old, new = change.old, change.new
        if old is None or new is None:
            return
        differs = functools.partial(lambda o, n: verdicts.signature_of(o) != verdicts.signature_of(n), old, new)
        if not self.memo.get("signature-differs", (old.name, new.name), differs):  # kept: no statement parsed
            return
        patched = c.kind == "patch"
        parent = c.upstream.rpartition(".")[0]
        owner = parent if "." in new.qualname else None
        key = (c.upstream, owner, patched, receiver.signature, receiver.kind)
        self.asked[(c.path, f"{c.line}:{c.upstream}")] = (key, change, receiver, owner, patched, owner_class)

    def seen(self, c: Coupling) -> bool:
        """B's own calls of what the coupling's function replaces were found: what they pass is known, so a
        guess from the signatures alone (``override-signature``, ``patch-signature``) is not needed."""
        found = self.asked.get((c.path, f"{c.line}:{c.upstream}"))
        return found is not None and self._found(found)[1] > 0

    def _found(self, asked: _Asked) -> tuple[tuple[tuple[str, str | None, str, str], ...], int]:
        key, change, receiver, owner, patched, _ = asked
        return self.memo.get("b-calls", key, functools.partial(self._refused, change, receiver, owner, patched))

    def answer(self, c: Coupling) -> tuple[str, str] | None:
        """B's first call the tree's function refuses that runs for the tree's objects (where, why)."""
        found = self.asked.get((c.path, f"{c.line}:{c.upstream}"))
        if found is None:
            return None
        owner_class = found[5]
        every = self._found(found)[0]
        if not every:
            return None
        gone_by = self._replaced(owner_class) if owner_class is not None else frozenset()
        for where, caller, method, reason in every:
            if caller is None or (caller, method) not in gone_by:
                return where, reason
        return None

    def passes(self) -> dict[str, passing.Passes]:
        """What B's own calls pass each definition asked about, by its canonical name at B (kept, as every
        answer here, for the next run): ``adapt`` reads it before it gives the tree's function a parameter."""
        out: dict[str, passing.Passes] = {}
        for _, change, _, owner, patched, _ in self.asked.values():
            new = change.new
            if new is None or new.name in out:
                continue
            ask = functools.partial(self._passes, new, owner, patched)
            out[new.name] = self.memo.get("b-passes", (new.name, owner, patched), ask)
        return out

    def _passes(self, new: Definition, owner: str | None, patched: bool) -> passing.Passes:
        return passing.of(self._indexes()[1], new, owner, patched)

    def _indexes(self) -> tuple[calls.CallIndex, calls.CallIndex]:
        """Both releases' calls of every name asked, read once per release when first needed. At B also each
        class whose ``__init__`` is asked: B constructs it by its name."""
        if self.indexes is None:
            self.indexes = (calls.CallIndex(self.a), calls.CallIndex(self.b))
            news = [ch.new for _, ch, *_ in self.asked.values() if ch.new is not None]
            names = {n.qualname.rpartition(".")[2] for n in news}
            classes = {n.qualname.split(".")[-2] for n in news if n.qualname.endswith(".__init__")}
            self.indexes[0].prepare(names)
            self.indexes[1].prepare(names | classes)
        return self.indexes

    def _refused(
        self, change: Change, receiver: Receiver, owner: str | None, patched: bool
    ) -> tuple[tuple[tuple[str, str | None, str, str], ...], int]:
        self._indexes()  # the first question not kept: read every name asked, once per release
        assert self.indexes is not None
        old, new = change.old, change.new
        assert old is not None and new is not None
        at_a = self.indexes[0].reaching(old, owner, patched)
        at_b = self.indexes[1].reaching(new, owner, patched)
        refused = tuple(
            (
                f"{self.b.label}'s {call.caller or 'module'} at {call.site}",
                calls.caller_class(call),
                call.caller.rpartition(".")[2],
                reason,
            )
            for call, reason in calls.refusals(receiver, at_a, at_b)
        )
        return refused, len(at_b)

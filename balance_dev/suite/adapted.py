"""The suite at B on the tree after ``adapt`` (issue "A bump adapts", item 6), beside the unadapted run.

A copy of the tree (never the tree itself) is adapted from A to B by this checkout's ``adapt`` (exit 0:
nothing left, 1: work left for a person; both wrote what they could). The suite then runs at B on the copy
exactly as on the tree (peeled the same way: what ``adapt`` left is still gone at B). The bump's failures
are the tests that pass at A on the unadapted tree and fail at B: before and after ``adapt``, side by side,
with the tests ``adapt`` fixed and, the one result that must not happen, any it broke.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from balance_dev.downstream import REPO_ROOT, HarnessError, say
from balance_dev.suite.outcomes import Outcome, SuiteRun, bump_failures

ADAPT_EXITS = (0, 1)  # written, nothing left / written, work left for a person
SHOWN = 20  # failures (and broken tests) listed by name; all are counted


def adapt_copy(
    tree: Path, work: Path, vllm_from: str, vllm_to: str, *, span: bool = False
) -> tuple[Path, dict[str, object]]:
    """A fresh copy of ``tree`` under WORK, adapted from A to B (``span``: with ``--span``, A kept); what adapt
    said and which files it changed."""
    copy = work / ("tree-spanned" if span else "tree-adapted") / tree.name
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(tree, copy, symlinks=True)
    cmd = [sys.executable, "-m", "generator", "--root", str(copy), "adapt", "--from", f"v{vllm_from}"]
    cmd += ["--to", f"v{vllm_to}", *(["--span"] if span else [])]
    say(f"adapt: {shlex.join(cmd)}")
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    log = work / f"adapt-v{vllm_to}{'-span' if span else ''}.log"
    log.write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode not in ADAPT_EXITS:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise HarnessError(f"adapt exited {done.returncode}: {last}")
    changed = sorted(
        p.relative_to(copy).as_posix()
        for p in copy.rglob("*.py")
        if not (tree / p.relative_to(copy)).is_file() or (tree / p.relative_to(copy)).read_bytes() != p.read_bytes()
    )
    said = done.stdout.splitlines()[:1]
    digest = hashlib.sha256()
    for rel in changed:
        digest.update(rel.encode() + b"\0" + (copy / rel).read_bytes() + b"\0")
    found = {"exit": done.returncode, "said": said[0] if said else "", "files_changed": changed}
    return copy, found | {"digest": digest.hexdigest()}


def _signatures_left(failed: Iterable[Outcome]) -> list[dict[str, object]]:
    """The signature failures left after adapt, by the function the call did not bind to (most first)."""
    found: Counter[str] = Counter()
    for outcome in failed:
        match = SIGNATURE.search(outcome.error)
        if match:
            found[f"{match.group(1)}() {match.group(2)}"] += 1
    return [{"tests": n, "call": c} for c, n in sorted(found.items(), key=lambda i: (-i[1], i[0]))[:SHOWN]]


def same_as_before(work: Path, label: str, digest: str) -> bool:
    """The adapted copy is the one WORK's runs under ``label`` were made on (``--reuse-runs`` may reuse them);
    records the digest for the next time."""
    kept = work / f"{label}.adapted-digest"
    same = kept.is_file() and kept.read_text("utf-8").strip() == digest
    kept.write_text(digest + "\n", encoding="utf-8")
    return same


# A call that does not bind to a signature, as Python words it: the failures issue 50 counts
SIGNATURE = re.compile(
    r"(\S+)\(\) (got an unexpected keyword argument|missing \d+ required|takes (from )?\d+ (to \d+ )?positional)"
)


def error_kind(error: str) -> str:
    """``signature`` for a call that does not bind; else the exception's name (``AttributeError``)."""
    if SIGNATURE.search(error):
        return "signature"
    head = error.split(":", 1)[0].strip()
    return head.rsplit(".", 1)[-1] if head and " " not in head else "other"


def side_by_side(at_from: SuiteRun, before: SuiteRun, after: SuiteRun) -> dict[str, object]:
    """The bump's failures at B before and after adapt (both against the unadapted tree's run at A); what adapt
    fixed and broke counted by the error's kind (``error_kind``: before for a fix, after for a break)."""
    failed_before = {o.test: o for o in bump_failures(at_from, before)}
    failed_after = {o.test: o for o in bump_failures(at_from, after)}
    broken = sorted(failed_after.keys() - failed_before.keys())
    fixed = failed_before.keys() - failed_after.keys()
    left = Counter(o.error for o in failed_after.values())
    return {
        "fixed_by_kind": dict(sorted(Counter(error_kind(failed_before[t].error) for t in fixed).items())),
        "broken_by_kind": dict(sorted(Counter(error_kind(failed_after[t].error) for t in broken).items())),
        "before_by_kind": dict(sorted(Counter(error_kind(o.error) for o in failed_before.values()).items())),
        "after_by_kind": dict(sorted(Counter(error_kind(o.error) for o in failed_after.values()).items())),
        # a test whose signature failure adapt answered: it passes now, or fails further on, another error
        "signature_failures_gone": sum(
            1
            for t, o in failed_before.items()
            if error_kind(o.error) == "signature" and (t not in failed_after or failed_after[t].error != o.error)
        ),
        "signature_left_by_function": _signatures_left(failed_after.values()),
        "at_to_before": before.counts(),
        "at_to_after": after.counts(),
        "bump_failures_before": len(failed_before),
        "bump_failures_after": len(failed_after),
        "fixed_by_adapt": len(failed_before.keys() - failed_after.keys()),
        "broken_by_adapt": len(broken),
        "broken_first": [{"test": t, "error": failed_after[t].error} for t in broken[:SHOWN]],
        "left_by_error": [
            {"tests": n, "error": e} for e, n in sorted(left.items(), key=lambda i: (-i[1], i[0]))[:SHOWN]
        ],
    }


def spanned(at_from: SuiteRun, tree_at_to: SuiteRun, span_at_from: SuiteRun, span_at_to: SuiteRun) -> dict[str, object]:
    """The spanned copy at A and at B beside the tree: at A no test that passed may fail (the tree must run at A
    as it did); at B its bump failures, against the tree's run at A, beside the tree's own at B."""
    new_at_from = sorted(bump_failures(at_from, span_at_from), key=lambda o: o.test)
    return {
        "at_from": span_at_from.counts(),
        "at_to": span_at_to.counts(),
        "new_failures_at_from": len(new_at_from),
        "new_failures_at_from_first": [{"test": o.test, "error": o.error} for o in new_at_from[:SHOWN]],
        "bump_failures_at_to": len(bump_failures(at_from, span_at_to)),
        "bump_failures_at_to_unspanned": len(bump_failures(at_from, tree_at_to)),
    }

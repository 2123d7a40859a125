"""``make bench-impact``: where ``impact`` spends its time on vllm-ascend 0.30.0rc2's tree, v0.30.0 to v0.33.0.

Cold: an empty cache (both releases' files read from the package index, release A's census index
built, every file of the tree read); warm: the same run again (the tree's readings from the cache);
one file changed: a line added to one of the tree's files, the rest from the cache. Each run is the
CLI in a fresh process, as a user runs it;
the phases are what it reports on stderr (the tree's sdist itself comes from the user's cache, read
once, not timed). Prints a table and writes benchmarks/results/impact.md.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from balance_dev import plugin_trees

RESULTS = Path(__file__).resolve().parent / "results" / "impact.md"
TREE = ("vllm-ascend", "0.30.0rc2")
TO = "v0.33.0"
CHANGED = "vllm_ascend/utils.py"  # the file the one-file-changed run edits: many of the tree's imports go through it
_TOOK = re.compile(r"balance-patchgen: ([0-9.]+) s \((.*)\)$", re.M)


IMPACT = ("impact", "--format", "json")
ADAPT = ("adapt", "--dry-run")  # issue 40's goal: warm, at most 60 s; exit 1 is work left, not a failure


def _run(tree: Path, cache: Path, command: tuple[str, ...] = IMPACT) -> tuple[float, float, dict[str, float]]:
    env = {**os.environ, "BALANCE_PATCHGEN_CACHE": str(cache)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "generator", command[0], "--root", str(tree), "--to", TO, *command[1:]],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in ((0, 1) if command == ADAPT else (0,)):
        raise SystemExit(f"{command[0]} failed ({done.returncode}): {done.stderr.strip().splitlines()[-1]}")
    found = _TOOK.search(done.stderr)
    if found is None and command == IMPACT:
        raise SystemExit("impact reported no timing line on stderr")
    phases = {k: float(v) for k, v in (p.rsplit(" ", 1) for p in found[2].split(", "))} if found else {}
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, phases


def _goal(run: str) -> int:
    """Issue 39's goals on 2 cores: cold, warm on an unchanged tree, after one file changed; issue 40's for
    ``adapt --dry-run`` warm."""
    return 60 if run in ("cold", "adapt --dry-run, warm") else 15 if run == "one file changed" else 10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm-runs", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-impact-") as work:
        tree = plugin_trees.tree(*TREE, Path(work) / "tree")
        cache = Path(work) / "cache"
        runs = [("cold", *_run(tree, cache))]
        runs += [(f"warm {n}", *_run(tree, cache)) for n in range(1, args.warm_runs + 1)]
        runs.append(("adapt --dry-run, warm", *_run(tree, cache, ADAPT)))
        changed = tree / CHANGED
        changed.write_text(changed.read_text(encoding="utf-8") + "\nBENCH_CHANGED = 1\n", encoding="utf-8")
        runs.append(("one file changed", *_run(tree, cache)))
    phases = list(runs[0][3])
    head = ["run", "wall s", "goal s", "CPU s", *phases]
    rows = [
        [name, f"{wall:.1f}", f"{_goal(name)}", f"{cpu:.1f}", *(f"{p[k]:.1f}" if k in p else "-" for k in phases)]
        for name, wall, cpu, p in runs
    ]
    table = "\n".join(
        ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]
    )
    text = (
        f"# `impact` on {TREE[0]} {TREE[1]}, its pin to {TO}\n\n"
        "Written by `make bench-impact` (benchmarks/impact_bench.py): the CLI in a fresh process each run, "
        "phases as it reports them on stderr. Goals (2 cores): warm on an unchanged tree at most 10 s, after one "
        "file changed at most 15 s, cold at most 60 s; `adapt --dry-run` warm at most 60 s (wall "
        "time only: impact's work, then the plan, the merges and the diff).\n\n"
        f"{table}\n\n"
        "- upstream reads: both releases' Python files (the wheel's members in range reads, cold; the cached "
        "zips, warm);\n- index: release A's census index (every function of the release as statement keys: "
        "parsing all its files in two worker processes, cold; the cached index, warm);\n- tree: reading and "
        "parsing the tree once for "
        "its sites and its functions (cold: the files in two worker processes; warm: each file's reading from "
        "the cache, by its digest);\n- copies: matching the tree's functions against the index;\n- overrides: "
        "the tree's classes' methods against their vLLM bases at A and B (warm: the judgement cache's answers);"
        "\n- resolve and compare: every vLLM name resolved at A and B, judged, and given its verdict (cold: the "
        "modules it needs parsed once each; warm: the judgement cache's answers, by what was asked, no module "
        "parsed).\n"
    )
    RESULTS.write_text(text)
    print(table)
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The whole run: every pair of plugin releases, adapt on P_A's tree, judged against P_B; then the reach check.

The tool's runs of a pair (impact's JSON of P_A, adapt's report and measures, impact's JSON of the
adapted tree) are kept in the work folder beside the trees, so ``--reuse`` judges them again without
running the tool: the judging is cheap, the runs are not.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from balance_dev.adapt_history import reach, run
from balance_dev.adapt_history.run import Pair
from generator.sources import package

# The maintainers' consecutive releases, each at the vLLM release after the one before.
PAIRS = (
    Pair("vllm-ascend", "0.28.0rc1", "0.29.0rc1"),
    Pair("vllm-ascend", "0.29.0rc1", "0.30.0rc1"),
    Pair("tpu-inference", "0.30.0", "0.31.0"),
    Pair("tpu-inference", "0.31.0", "0.32.0"),
)
# No release of theirs at B yet: adapt's tree is read at B by impact, nothing compared with P_B; every
# copy adapt re-synced is still checked again. vllm-kunlun publishes one release: a third plugin's tree.
REACHES = (
    Pair("vllm-ascend", "0.30.0rc2", None, "v0.33.0"),
    Pair("vllm-kunlun", "0.11.1", None, "v0.12.0"),
)
RUNS = "runs.json"


def label(pair: Pair) -> str:
    return f"{pair.project} {pair.old}" + (f" -> {pair.new}" if pair.new else "")


def tool_runs(pair: Pair, base: Path, say: Any) -> dict[str, Any]:
    """P_A's (and P_B's) trees unpacked fresh, and the tool run on them: what ``--reuse`` keeps."""
    before = run.unpack(pair.project, pair.old, run.fresh(base / "before"))
    adapted = run.unpack(pair.project, pair.old, run.fresh(base / "adapted"))
    after = run.unpack(pair.project, pair.new, run.fresh(base / "after")) if pair.new else None
    old, named_by = run.release_of(before, pair.old)
    new = pair.to or (run.release_of(after, pair.new or "")[0] if after is not None else old)
    say(f"{label(pair)}: vLLM {old} -> {new}: impact on P_A")
    report, measured = run.impact_json(before, old, new)
    say(f"{label(pair)}: adapt --from {old} --to {new} (impact took {measured.seconds:.0f} s)")
    adapt = run.tool(["--root", str(adapted), "adapt", "--from", old, "--to", new])
    # 1: written, with work left for a person (docs/adapt.md, "Exit codes"): the figures count that work.
    if adapt.code not in (0, 1):
        raise RuntimeError(f"adapt exited {adapt.code} on {label(pair)}: {adapt.stderr.strip().splitlines()[-1:]}")
    say(f"{label(pair)}: adapt took {adapt.seconds:.0f} s, {adapt.peak_mb:.0f} MB")
    runs: dict[str, Any] = {
        "from": old,
        "to": new,
        "from_named_by": named_by,
        "trees": {"before": str(before), "adapted": str(adapted), "after": str(after) if after else None},
        "impact": report,
        "impact_seconds": measured.seconds,
        "adapt": {"seconds": adapt.seconds, "peak_mb": adapt.peak_mb, "exit": adapt.code, "stdout": adapt.stdout},
    }
    if pair.new is None:
        say(f"{label(pair)}: impact --from {new} --to {new} on adapt's tree")
        runs["later"], _ = run.impact_json(adapted, new, new)
    (base / RUNS).write_text(json.dumps(runs), encoding="utf-8")
    return runs


def one(pair: Pair, work: Path, say: Any, reuse: bool) -> dict[str, Any]:
    base = work / f"{pair.project}-{pair.old}"
    kept = base / RUNS
    runs = json.loads(kept.read_text("utf-8")) if reuse and kept.is_file() else tool_runs(pair, base, say)
    trees = {k: Path(v) if v else None for k, v in runs["trees"].items()}
    stdout = runs["adapt"]["stdout"]
    out: dict[str, Any] = {
        "project": pair.project,
        "from_version": pair.old,
        "to_version": pair.new,
        "from": runs["from"],
        "to": runs["to"],
        "from_named_by": runs["from_named_by"],
        "adapt_summary": stdout.splitlines()[0] if stdout else "",
        "measured": {
            "adapt_seconds": round(runs["adapt"]["seconds"], 1),
            "adapt_peak_mb": round(runs["adapt"]["peak_mb"]),
        },
    }
    say(f"{label(pair)}: comparing")
    after = trees["after"]
    out |= run.judge_pair(
        runs["impact"],
        stdout,
        run.py_files(trees["before"]),  # type: ignore[arg-type]
        run.py_files(after) if after is not None else None,
        run.py_files(trees["adapted"]),  # type: ignore[arg-type]
        package.release(runs["from"]),
        package.release(runs["to"]),
    )
    if "later" in runs:
        out["reach"] = reach.check(runs["impact"], runs["later"], run.report_left(stdout))
    return out


def everything(work: Path, say: Any, only: str | None = None, reuse: bool = False) -> dict[str, Any]:
    started = time.monotonic()
    pairs = [p for p in (*PAIRS, *REACHES) if only is None or only in f"{p.project}-{p.old}"]
    results = [one(p, work, say, reuse) for p in pairs]
    # With --reuse the tool did not run: the wall time is the judging's alone, and says so.
    return {"pairs": results, "measured": {"wall_seconds": round(time.monotonic() - started), "reused_runs": reuse}}

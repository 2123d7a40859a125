"""``python -m balance_dev.adapt_history [--work DIR] [--only NAME] [--reuse]``: every pair, the JSON and the table.

Exit 0 with the results written (benchmarks/results/adapt-history.json and .md; with ``--only``, WORK/only.json);
1 when a tool run fails or a plugin's sdist cannot be had (one line saying which).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from balance_dev import plugin_trees
from balance_dev.adapt_history import history, report
from balance_dev.project_files import REPO_ROOT
from generator.errors import PatchgenError

RESULTS = REPO_ROOT / "benchmarks" / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m balance_dev.adapt_history", description=__doc__)
    parser.add_argument("--work", type=Path, default=REPO_ROOT / "build" / "adapt-history")
    parser.add_argument("--only", metavar="NAME", help="the pairs whose project-version holds NAME (no files written)")
    parser.add_argument("--reuse", action="store_true", help="judge the tool's runs kept in --work again; run nothing")
    args = parser.parse_args(argv)

    def say(message: str) -> None:
        print(f"adapt-history: {message}", file=sys.stderr, flush=True)

    try:
        results = history.everything(args.work, say, args.only, args.reuse)
    except (RuntimeError, PatchgenError, plugin_trees.TreeUnavailable) as exc:
        say(f"error: {exc}")
        return 1
    text = report.markdown(results)
    if args.only is None:
        (RESULTS / "adapt-history.json").write_text(report.to_json(results), encoding="utf-8")
        (RESULTS / "adapt-history.md").write_text(text, encoding="utf-8")
    else:
        (args.work / "only.json").write_text(report.to_json(results), encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

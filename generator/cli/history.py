"""``python -m generator.cli.history``: ``make history``'s command line (generator/judge/history.py is the work)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from generator.cli.exits import exit_code_for
from generator.errors import PatchgenError
from generator.judge import history
from generator.sources import copies


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m generator.cli.history", description=history.__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=Path("docs/history.md"))
    parser.add_argument("--since", default=copies.FIRST, help="first vllm-ascend release read (default %(default)s)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        timings = history.run(args.out, args.since)
    except PatchgenError as error:
        print(f"balance-patchgen: error: {error}", file=sys.stderr)
        return exit_code_for(error)
    except OSError as error:
        print(f"balance-patchgen: error: cannot access {error.filename} ({error.strerror})", file=sys.stderr)
        return 2
    for label, seconds in timings:
        history.progress(f"{label}: {seconds:.2f} s")
    history.progress(f"total: {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``make bench``: every benchmark in one run, printed and written to benchmarks/results/REPORT.md."""

from __future__ import annotations

import json
import os
import platform
import time

from benchmarks import gather_bench, generator_bench, net_report, schedule_bench
from benchmarks.common import REPO

NET_RESULTS = REPO / "benchmarks" / "results" / "net_collective.json"


def net_section() -> str:
    """A pointer to ``make bench-net``'s report (it needs root, so ``make bench`` does not run it)."""
    lines = [
        "### The per-step gather across a network delay",
        "",
        "Measured by `make bench-net` (root and network namespaces; not part of `make bench`): "
        "[net_collective.md](net_collective.md), method in docs/benchmarks.md.",
    ]
    if NET_RESULTS.exists():
        data = json.loads(NET_RESULTS.read_text())
        figures = "; ".join(net_report.headline(data))
        lines += ["", f"`group_max` (what `balance_gather()` runs), 50 us links: {figures}."]
    return "\n".join(lines)


def main() -> None:
    start = time.monotonic()
    sections = []
    for name, module in (("generator", generator_bench), ("schedule", schedule_bench), ("gather", gather_bench)):
        print(f"running {name} benchmark...", flush=True)
        section = module.run()
        print(section, flush=True)
        sections.append(section)
    sections.append(net_section())
    header = (
        "# balance-patchgen benchmarks\n\n"
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}. "
        "Noisy shared machine: read ratios, not absolute times. "
        f"Whole run: {time.monotonic() - start:.0f} s (`make bench`).\n"
    )
    report = header + "\n" + "\n\n".join(sections) + "\n"
    out = REPO / "benchmarks" / "results" / "REPORT.md"
    out.write_text(report)
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()

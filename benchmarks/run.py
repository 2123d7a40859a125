"""``make bench``: every benchmark in one run, printed and written to benchmarks/results/REPORT.md."""

from __future__ import annotations

import os
import platform
import time

from benchmarks import gather_bench, generator_bench, schedule_bench
from benchmarks.common import REPO


def main() -> None:
    start = time.monotonic()
    sections = []
    for name, module in (("generator", generator_bench), ("schedule", schedule_bench), ("gather", gather_bench)):
        print(f"running {name} benchmark...", flush=True)
        section = module.run()
        print(section, flush=True)
        sections.append(section)
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

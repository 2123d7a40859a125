"""Does ``sched_yield`` hand the core to a process of another session? (docs/benchmarks.md, bench-serve)

    python -m benchmarks.yield_sessions [--trials 3]

vLLM's shm queues wait by spinning on ``sched_yield``. Linux groups the processes of a session for the
scheduler (autogroup), and a yield only lets the caller's own group run first. Here a counting loop runs
3 s bound to CPU 0, alone, then beside a ``sched_yield`` spinner bound to the same CPU in its own session,
then beside one in another session (how the headless topology's second "node" is started). Printed:
the loop's iterations, and in its own and in another session as a share of alone.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

SECONDS = 3.0


def _spin() -> None:
    os.sched_setaffinity(0, {0})
    while True:
        os.sched_yield()


def _work() -> None:
    os.sched_setaffinity(0, {0})
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < SECONDS:
        n += 1
    print(n, flush=True)


def _count() -> int:
    out = subprocess.run([sys.executable, "-m", "benchmarks.yield_sessions", "--role", "work"], capture_output=True)
    return int(out.stdout)


def _beside_spinner(new_session: bool) -> int:
    spinner = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.yield_sessions", "--role", "spin"], start_new_session=new_session
    )
    try:
        time.sleep(0.3)
        return _count()
    finally:
        spinner.kill()
        spinner.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.yield_sessions", description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--role", choices=["spin", "work"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.role == "spin":
        _spin()
    if args.role == "work":
        _work()
        return 0
    for _ in range(args.trials):
        alone, same, other = _count(), _beside_spinner(False), _beside_spinner(True)
        print(
            f"loop iterations in {SECONDS:g} s on CPU 0: alone {alone}; beside a sched_yield spinner of its own "
            f"session {same} ({same / alone:.0%}); of another session {other} ({other / alone:.0%})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

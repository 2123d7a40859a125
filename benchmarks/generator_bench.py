"""Generator cost: warm ``check`` against its floor (parsing upstream with libcst), cold vs warm
``regen``, bytes downloaded per source, and where the time goes (cProfile)."""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from balance_dev.upstream_repo import build_vllm_repo
from benchmarks.common import BIN, REPO, table, time_command
from generator.builder import pipeline, verify
from generator.pins.pin import PIN_FILE, read_pin
from generator.sources import git as git_source
from generator.sources import installed, release

RUNS = 7
PAIRS = 21


def run() -> str:
    tag = read_pin(REPO / PIN_FILE)
    upstream = installed.fetch(tag)
    cache = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    # Warm as on a maintainer's machine: Python may write its bytecode (a CI image may forbid it;
    # then every run recompiles the generator's own modules, ~70 ms that libcst, installed, never pays).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["BALANCE_PATCHGEN_CACHE"] = str(cache)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "scheduler.py"
        src.write_bytes(upstream.data)
        cli = str(BIN / "balance-patchgen")
        floor, check_warm, check_ratio = _paired(
            [str(BIN / "python"), "-c", "import sys, libcst; libcst.parse_module(open(sys.argv[1]).read())", str(src)],
            [cli, "check"],
            env=env,
        )
        out = str(Path(tmp) / "out.py")
        regen_warm = time_command([cli, "regen", "--output", out], runs=RUNS, env=env)

        def cold_env() -> dict[str, str]:
            shutil.rmtree(cache, ignore_errors=True)
            return env

        regen_cold = min(
            time_command([cli, "regen", "--source", "release", "--output", out], runs=1, env=cold_env())
            for _ in range(3)
        )
        _, release_bytes = release.fetch(tag)
        git_bytes = _git_clone_bytes(Path(tmp), upstream.data, tag, env)
    profile = _profile(upstream)
    rows = [
        ["floor: `python -c 'import libcst; parse_module(scheduler.py)'`", f"{floor:.3f}", "1.00x"],
        [
            "`balance-patchgen check` (warm: installed vLLM, no network)",
            f"{check_warm:.3f}",
            f"{check_ratio:.2f}x",
        ],
        ["`balance-patchgen regen` warm", f"{regen_warm:.3f}", f"{regen_warm / floor:.2f}x"],
        [
            "`balance-patchgen regen --source release` cold (empty cache, network)",
            f"{regen_cold:.3f}",
            f"{regen_cold / floor:.2f}x",
        ],
    ]
    downloads = [
        ["release (wheel, HTTP range reads)", f"{release_bytes:,}", "goal < 2,000,000"],
        [
            "git URL (blob-less clone of a one-file history, file://)",
            f"{git_bytes:,}",
            "a real vLLM URL also fetches one commit's trees",
        ],
        ["installed", "0", "reads site-packages, checks RECORD"],
    ]
    return "\n\n".join(
        [
            f"### Generator (vLLM {tag}, {len(upstream.data):,} bytes upstream; median of {RUNS} runs, seconds)",
            table(["what", "seconds", "vs floor"], rows),
            f"Goal: warm `check` at most 1.5x the floor. Floor and check run alternately, {PAIRS} pairs; "
            "their ratio is the median of the per-pair ratios (this machine's speed drifts by tens of "
            "percent within seconds, which separate medians would mistake for cost). Other rows: "
            "ratio of medians.",
            "#### Bytes downloaded by a cold fetch",
            table(["source", "bytes", "note"], downloads),
            "#### Where `generate()` + `verify()` spend their time (cProfile, cumulative, top 12)",
            "```\n" + profile + "\n```",
        ]
    )


def _paired(floor: list[str], command: list[str], *, env: dict[str, str]) -> tuple[float, float, float]:
    """Median seconds of each, and the median of per-pair ratios, over PAIRS alternating runs."""
    for argv in (floor, command):  # the first run writes bytecode; it is not a warm run
        subprocess.run(argv, cwd=REPO, env=env, check=True, capture_output=True)
    floors: list[float] = []
    commands: list[float] = []
    for _ in range(PAIRS):
        for argv, samples in ((floor, floors), (command, commands)):
            start = time.perf_counter()
            subprocess.run(argv, cwd=REPO, env=env, check=True, capture_output=True)
            samples.append(time.perf_counter() - start)
    ratio = statistics.median(c / f for c, f in zip(commands, floors, strict=True))
    return statistics.median(floors), statistics.median(commands), ratio


def _git_clone_bytes(tmp: Path, data: bytes, tag: str, env: dict[str, str]) -> int:
    origin = build_vllm_repo(tmp / "origin", [(tag, data)])
    old = os.environ.get("BALANCE_PATCHGEN_CACHE")
    os.environ["BALANCE_PATCHGEN_CACHE"] = env["BALANCE_PATCHGEN_CACHE"]
    try:
        git_source.fetch(tag, origin.as_uri())
        clone = next((Path(env["BALANCE_PATCHGEN_CACHE"]) / "git").iterdir())
        return sum(p.stat().st_size for p in (clone / "objects").rglob("*") if p.is_file())
    finally:
        if old is None:
            os.environ.pop("BALANCE_PATCHGEN_CACHE", None)
        else:
            os.environ["BALANCE_PATCHGEN_CACHE"] = old


def _profile(upstream: object) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    text = pipeline.generate(upstream)  # type: ignore[arg-type]
    verify.verify(text, upstream.text)  # type: ignore[attr-defined]
    profiler.disable()
    buffer = io.StringIO()
    pstats.Stats(profiler, stream=buffer).sort_stats("cumulative").print_stats(12)
    lines = [line for line in buffer.getvalue().splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if "ncalls" in line)
    return "\n".join(line.replace(str(REPO) + "/", "") for line in lines[start : start + 13])


if __name__ == "__main__":
    print(run())

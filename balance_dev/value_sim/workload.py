"""The workload: request lengths (lognormal, clipped to the model length), arrival times (Poisson, bursty), and
a trace of real arrivals."""

from __future__ import annotations

import json
import math
import random
import statistics
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Lengths:
    """Lognormal prompt and output lengths (medians and log-space sigmas), clipped to the model length."""

    prompt_median: float = 400.0
    prompt_sigma: float = 0.8
    output_median: float = 100.0
    output_sigma: float = 0.8
    max_model_len: int = 2048  # balance_dev.vllm_objects.make_vllm_config

    def draw(self, rng: random.Random) -> tuple[int, int]:
        prompt = int(rng.lognormvariate(math.log(self.prompt_median), self.prompt_sigma))
        prompt = min(max(prompt, 1), self.max_model_len * 3 // 4)
        output = int(rng.lognormvariate(math.log(self.output_median), self.output_sigma))
        return prompt, min(max(output, 1), self.max_model_len - prompt)


Arrival = tuple[float, int, int]  # (time s, prompt tokens, output tokens)


def poisson_times(rng: random.Random, rate: float, seconds: float) -> list[float]:
    times, t = [], 0.0
    while rate > 0:
        t += rng.expovariate(rate)
        if t >= seconds:
            break
        times.append(t)
    return times


def bursty_times(rng: random.Random, rate: float, seconds: float, burst_mean: float) -> list[float]:
    """Compound Poisson: bursts at ``rate / burst_mean``, each a geometric number (mean ``burst_mean``)
    of requests arriving together; the mean rate is ``rate``."""
    p = 1.0 / burst_mean
    times = []
    for t in poisson_times(rng, rate / burst_mean, seconds):
        size = 1 if p >= 1.0 else 1 + int(math.log(1.0 - rng.random()) / math.log(1.0 - p))
        times.extend([t] * size)
    return times


def load_trace(path: str | Path) -> list[Arrival]:
    """JSONL, one request a line: ``{"arrival_s": 0.5, "prompt_len": 300, "output_len": 80}``."""
    rows = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows.append((float(row["arrival_s"]), int(row["prompt_len"]), int(row["output_len"])))
    return sorted(rows)


def mean_output(lengths: Lengths, draws: int = 100_000) -> float:
    """The mean output length of the distribution (fixed-seed Monte Carlo: clipping has no closed form)."""
    rng = random.Random(0)
    return statistics.fmean(lengths.draw(rng)[1] for _ in range(draws))

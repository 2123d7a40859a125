"""The benchmarks: ``make bench`` (``run``: the generator's cost, ``schedule()`` and the gather per step), and
the runs not in it (``serve``: balance through ``vllm serve``; ``net_collective``: the gather across a network
delay; ``impact_bench``); their results are in ``benchmarks/results/`` (docs/benchmarks.md)."""

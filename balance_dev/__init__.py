"""Development-only code: tests, simulations and benchmarks share it; the wheel does not ship it."""

"""Test-only vLLM general plugin for ``make e2e`` (installed into ``.venv-e2e`` only).

Inert unless ``BALANCE_E2E_PROBE_DIR`` is set. Then, in every process vLLM starts:

- ``cpu_shims``: fills the gaps of vLLM's CPU build on the DP MoE path that the installed vLLM has
  (gloo ``all_gatherv`` / ``reduce_scatterv``; the fused-MoE torch fallback's SiLU on CPUs without
  AVX512);
- ``hook``: wraps ``EngineCoreProc._process_engine_step`` once; the first step of each engine core builds,
  by ``BALANCE_E2E_PROBE_MODE``, either
- ``recorder``: in each engine-core process, writes ``rank<N>.json`` with what that process really ran:
  the engine-core class, the scheduler class, the shims filled, the requests each ``schedule()``
  admitted, and per step whether balance's gate was closed while requests waited on this rank; or
- ``counter`` (the serving benchmark): counts and clock sums, written when the engine core goes idle.

Both read an engine core through ``engine_facts`` and import nothing else of the probe: imports run
``register`` -> ``hook`` -> ``recorder`` / ``counter`` -> ``engine_facts``, never back.
"""

import os


def register() -> None:
    out_dir = os.environ.get("BALANCE_E2E_PROBE_DIR")
    if not out_dir:
        return
    from balance_e2e_probe import cpu_shims, hook

    hook.install(out_dir, cpu_shims.install())

"""The balance scheduler's hand-written parts: its base (state, the per-step gather, the tripwire), the gather's
log-depth maximum (``group_max``), the start-up agreement of the DP group, the guard against another vLLM's
scheduler, the seam override, and ``scheduler_path``, which picks the seam or the generated copy."""

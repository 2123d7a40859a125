"""When does balance scheduling pay? A DP serving simulator on real vLLM schedulers.

One process plays a whole DP group in lockstep: per rank a real scheduler (upstream's ``Scheduler`` or
the generated ``BalanceScheduler``) fed fake model outputs, a step-time model for an MoE forward,
vLLM's own DP load-balancing score for routing, and arrivals in simulated wall time.

    python -m balance_dev.value_sim --dp 8 --arrivals poisson --load 1.0 --balance on --json

``model`` holds the simulator, ``sweep`` the standard sweep behind ``make value-sim``.
"""

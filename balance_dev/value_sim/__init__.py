"""When does balance scheduling pay? A DP serving simulator on real vLLM schedulers.

One process plays a whole DP group in lockstep: per rank a real scheduler (upstream's ``Scheduler`` or
the generated ``BalanceScheduler``) fed fake model outputs, a step-time model for an MoE forward,
vLLM's own DP load-balancing score for routing, and arrivals in simulated wall time.

    python -m balance_dev.value_sim --dp 8 --arrivals poisson --load 1.0 --balance on --json

``model`` holds the simulation (the lockstep loop, its metrics), over its parts: ``config`` (a run's
settings), ``cost`` (the step-time model), ``workload`` (lengths, arrivals, traces), ``routing`` (vLLM's
own client routing and the coordinator's publications), ``ranks`` (a real scheduler per rank and what the
gate reads), ``collective`` (the gather's cost per step, fitted to ``make bench-net``). ``sweep`` runs the
standard sweep behind ``make value-sim``: ``sweep_plan`` (what it runs, as data), ``sweep_report`` (the
tables), ``sweep_plots``. Imports run ``sweep`` -> ``sweep_report`` -> ``sweep_plots`` -> ``sweep_plan``
-> ``config``; ``model`` -> ``ranks`` -> ``config`` -> ``cost``, ``workload``, ``collective``.
"""

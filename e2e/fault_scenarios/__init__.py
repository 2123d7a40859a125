"""``make e2e-faults``' scenarios, one module per fault family; ``e2e/faults.py`` runs them (docs/e2e.md).

``plan`` is the table of runs as data (topology, node settings, request lengths, timeouts); ``outcomes``
what became of each request, a scenario's ``Result``, the ``Ledger`` of the runs so far and ``Step``, the
shape of every scenario; ``watch`` the probe's view of each rank and the processes left. The families:
``freeze``, ``pause`` (pause and sleep), ``cuts`` (client cuts, the second load), ``dead_rank``, ``mismatch``
(ranks whose settings differ). Imports run families -> ``outcomes``, ``watch`` -> ``plan``, and to the e2e's
own modules (``client``, ``deployment``, ``procs``, ``run``, ``server_log``); nothing here imports ``faults``.
"""

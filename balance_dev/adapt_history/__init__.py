"""`make adapt-history`: ``adapt`` judged by what a plugin's maintainers wrote at their next release.

A plugin publishes a release per vLLM release, so the maintainers' own adaptation of a tree from vLLM
A to B is on the package index. For each pair of releases (P_A at A, P_B at B) ``adapt`` runs on a
fresh copy of P_A's tree, and its result is compared with P_B: the moved vLLM names P_B rewrote
(``names``), the copies P_B re-synced or left stale, statement by statement (``copies``,
``statements``), and every copy ``adapt`` wrote checked again here, apart from ``judge.resync``
(``statements.check``). ``reach`` is the check that after ``adapt`` no name the tree's own code
reaches is still on a path ``impact`` called moved. ``run`` drives the real trees; ``report``
writes benchmarks/results/adapt-history.json and the markdown table.
"""

"""What a bump's failures hit: each failing test of a plugin's own run named by the couplings ``impact`` says it
hit, by rules over the error and the traceback's frames (``attribute``), read from the plugin's JUnit XML
(``junit``) or the suite harness's records. One attribution in the project: the harness calls this.

May import: ``judge.couplings`` (what a coupling is), ``sources`` and what all share.
"""

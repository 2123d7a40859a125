"""A consumer's tree: what it keeps (``layout``, with the shipped ``layouts/``), and its copies placed in it.

``layout`` reads a tree's specs (``balance-patchgen.toml``, or the built-in layout its files show),
``region`` finds and renders a copy's marked region, ``place`` regenerates one copy inside its file
(a pure function of texts), ``adopt`` regenerates every copy a tree declares and says what changed.

May import: ``generator.pins``, ``generator.judge``, ``generator.builder``, ``generator.sources`` and the
shared modules.
"""

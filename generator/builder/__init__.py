"""Build a copy: upstream's function in, the copy's text out (extract, edits, deltas, imports, render).

``pipeline`` is the pure core (upstream file in, generated module text out); ``extract`` finds the
function with libcst, ``deltas`` are the three balance deltas as libcst transforms over the anchor
machinery of ``anchors``, ``edits`` applies a spec's data edits (patterns of ``astpattern``),
``copy_forms`` lists every form a copy has written the gate in, ``imports`` and ``render`` make the
module, ``seam`` writes the upstream change that ends the copy, and ``verify`` is the build's
independent twin (stdlib ``ast`` only, sharing no code with ``deltas``), which every build ends with.

May import: ``generator.sources`` and the shared modules (``errors``, ``atomic``, ``tags``).
"""

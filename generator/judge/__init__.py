"""Judge copies and couplings: is a copy what it should be, which release is it, what does a bump change.

``check`` is the drift gate's comparison, ``provenance`` reduces functions to statements and tells
which release a copy is, ``migrate`` and ``capcheck`` judge a hand-kept ``schedule()``, ``history``
judges every copy vllm-ascend released, ``census`` finds every copy of a vLLM function in a tree.

May import: ``generator.builder``, ``generator.sources`` and the shared modules.
"""

"""Where upstream comes from: vLLM's files at a release or ref, from git, an installed vLLM or the release wheel.

Every backend returns the same bytes (``UpstreamFile``); ``resolve`` chooses one and is the entry point
the stages use, ``cache`` keeps verified files, ``index`` reads the package index pip is configured with.

May import: the shared modules only (``errors``, ``atomic``, ``tags``).
"""

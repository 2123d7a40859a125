"""Couplings and impact: every place a plugin's tree depends on a vLLM definition, judged between two releases.

See docs/impact.md. ``impact.run`` is the entry point; ``report`` writes what it found.
"""

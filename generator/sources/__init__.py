"""Where upstream ``scheduler.py`` comes from. Every backend returns the same ``UpstreamFile``."""

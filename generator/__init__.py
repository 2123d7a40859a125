"""balance-patchgen: vLLM functions copied into a plugin's tree as build products, with a drift gate.

The folders are the stages, each importing only those below it (docs/architecture.md):
``cli`` -> ``tree`` -> ``pins`` -> ``judge`` -> ``builder`` -> ``sources`` -> the shared modules here
(``errors``: every typed failure; ``atomic``: all-or-nothing writes; ``tags``: what a tag or ref is).
"""

# The one place the version is written: pyproject.toml reads it (dynamic), --version prints it.
__version__ = "0.1.0"

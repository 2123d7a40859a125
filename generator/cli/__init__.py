"""The ``balance-patchgen`` command line: a thin click shell over the stages (docs/cli.md)."""

from generator.cli.app import main
from generator.cli.exits import exit_code_for

__all__ = ["exit_code_for", "main"]

"""The ``balance-patchgen`` group: every failure one line with a documented exit code, commands loaded when run.

A command's module (and the stages it imports) is imported only when that command runs, so
``--version``, ``check`` and ``census`` each pay for their own stages and no other's.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import Any

import click

from generator import __version__
from generator.cli.exits import EXIT_BUG, EXIT_INTERRUPTED, fail, fail_line, os_error
from generator.cli.root import root_option
from generator.errors import PatchgenError, UsageError

# Command name -> where it is defined (module:attribute), in help order.
COMMANDS = {
    "regen": "generator.cli.generate:regen",
    "check": "generator.cli.generate:check",
    "verify": "generator.cli.generate:verify_cmd",
    "bump": "generator.cli.pins:bump",
    "matrix": "generator.cli.pins:matrix",
    "seam": "generator.cli.seam:seam_cmd",
    "migrate": "generator.cli.judge:migrate",
    "census": "generator.cli.judge:census_cmd",
    "couplings": "generator.cli.couplings:couplings",
    "impact": "generator.cli.couplings:impact",
    "adapt": "generator.cli.adapt:adapt",
    "explain": "generator.cli.explain:explain",
    "specs": "generator.cli.specs:specs",
}


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, _, attribute = where.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{where} is not a click command")
        return command

    def main(self, *args: Any, **kwargs: Any) -> Any:
        # click's standalone mode prints a multi-line usage block and maps Ctrl-C to exit 1 (the drift
        # code); handle both here so every failure is one line with a documented code.
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as error:
            error.show()
            sys.exit(error.exit_code)
        except click.UsageError as error:
            where = error.ctx.command_path if error.ctx else "balance-patchgen"
            fail_line(f"{error.format_message().rstrip('.')}: see `{where} --help`", error.exit_code)
        except click.ClickException as error:
            fail_line(f"{error.format_message().rstrip('.')}: see `balance-patchgen --help`", error.exit_code)
        except click.Abort:
            fail_line("interrupted: run the command again (files are written all or nothing)", EXIT_INTERRUPTED)
        except PatchgenError as error:  # raised while parsing (a --root given twice, differently)
            fail(error)
        sys.exit(result if isinstance(result, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PatchgenError as error:
            fail(error)
        except OSError as error:  # e.g. a read-only or full disk while writing: still one line, exit 2
            fail(os_error(error))
        except MemoryError:
            # Hostile input (a huge or endless file) is the usual cause, so this is bad input, not a bug.
            fail(UsageError("out of memory: check that the files and options given are the ones you meant"))
        except KeyboardInterrupt:
            fail_line("interrupted: run the command again (files are written all or nothing)", EXIT_INTERRUPTED)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as error:
            # Last resort: anything untyped is a defect of the generator, never drift (1) or bad input (2).
            if os.environ.get("BALANCE_PATCHGEN_TRACEBACK"):
                traceback.print_exc()
            first = (str(error).splitlines() or [""])[0]
            fail_line(
                f"unexpected {type(error).__name__}: {first}: this is a bug, please report it with the command "
                "you ran (set BALANCE_PATCHGEN_TRACEBACK=1 for the traceback)",
                EXIT_BUG,
            )


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="balance-patchgen", message="%(prog)s %(version)s")
@root_option
def main() -> None:
    """Generate vllm-ascend's balance scheduler from vLLM's Scheduler.schedule() at the pinned tag."""

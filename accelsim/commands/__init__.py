"""The `accelsim` subcommands, one module each, in the order `accelsim --help` lists them. A command module
declares COMMAND (accelsim.commands.command.Command: name, help, the function adding its arguments, its handler)
and imports the work it does inside its handler, so that declaring every command stays fast.

Adding a subcommand is one module here and one entry in COMMANDS; accelsim/cli.py iterates them.
"""
from __future__ import annotations

from accelsim.commands import (arch, archs, collective, compare, cosim, explain, export, map, models, ops, plan, run,
                               sweep, train, validate)
from accelsim.commands import eval as evaluate
from accelsim.commands.command import Command

COMMANDS: tuple[Command, ...] = (
    run.COMMAND, evaluate.COMMAND, export.COMMAND, map.COMMAND, cosim.COMMAND, compare.COMMAND, train.COMMAND,
    plan.COMMAND, ops.COMMAND, collective.COMMAND, archs.COMMAND, arch.COMMAND, models.COMMAND, explain.COMMAND,
    sweep.COMMAND, validate.COMMAND,
)

"""The `accelsim` command: the subcommands accelsim.commands lists (run, eval, export, ..., validate), each declared
by its own module there.

Bad input ends in one line on stderr and exit status 2; never a traceback (an internal error says so,
exit 3, with the traceback behind ACCELSIM_DEBUG=1).
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings

from accelsim import __version__, commands
from accelsim.args import check_outputs
from accelsim.collector import paused
from compiler.errors import UserError

EXIT_USAGE, EXIT_INTERNAL = 2, 3


def main(argv: list[str] | None = None) -> int:
    warnings.showwarning = _show_warning
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 0
    try:
        check_outputs(args)
        with paused():      # a command's model lives to its end: the collector would scan it over and over
            return args.handler(args) or 0
    except UserError as error:
        print(f"accelsim: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("accelsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as error:  # a bug in accelsim, not in the user's input
        if os.environ.get("ACCELSIM_DEBUG"):
            traceback.print_exc()
        print(f"accelsim: internal error: {type(error).__name__}: {error} "
              f"(set ACCELSIM_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
        return EXIT_INTERNAL


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """accelsim's own warnings (an arch beyond any buildable chip, a model that does not fit) as one line, as its
    errors are."""
    from accelsim.arch.schema import ArchWarning
    from compiler.errors import CacheWarning, CapacityWarning

    if issubclass(category, (ArchWarning, CacheWarning, CapacityWarning)):
        print(f"accelsim: warning: {message}", file=sys.stderr)
    else:
        _PLAIN_WARNING(message, category, filename, lineno, file, line)


_PLAIN_WARNING = warnings.showwarning


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line: every command of accelsim.commands.COMMANDS, in order. Given `argv`, a command whose
    declaration is costly (validate's actions import the CUDA harness and onnx's conformance cases, ~1.5 s) is
    declared whole only when it is argv's command."""
    asked = None if argv is None else next((arg for arg in argv if not arg.startswith("-")), "")
    parser = argparse.ArgumentParser(prog="accelsim", description="Simulate AI models on accelerators "
                                     "described in YAML.")
    parser.add_argument("--version", action="version", version=f"accelsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in commands.COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.description)
        cheap = command.add_cheap is not None and asked not in (None, command.name)
        (command.add_cheap if cheap else command.add)(p)
        if command.handler is not None:
            p.set_defaults(handler=command.handler)
    _describe(parser)
    return parser


def _describe(parser: argparse.ArgumentParser) -> None:
    """Every subcommand's own --help opens with the line its parent lists it with."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                sub.description = sub.description or helps.get(name)
                _describe(sub)


if __name__ == "__main__":
    sys.exit(main())

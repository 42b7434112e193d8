"""What a subcommand declares: its name, the line `accelsim --help` lists it with, the function that adds its
arguments (or actions) to its parser, and its handler. accelsim/cli.py adds every one of accelsim.commands.COMMANDS.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """One `accelsim NAME`: `add(parser)` declares its arguments (actions set their own handler); `handler(args)`
    runs it and returns the exit status. `add_cheap`, where given, is declared instead of `add` when another command
    is asked for: declaring all of `add` costs time (validate's actions import the CUDA harness, ~1.5 s)."""

    name: str
    help: str
    add: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int] | None = None
    description: str | None = None
    add_cheap: Callable[[argparse.ArgumentParser], None] | None = None

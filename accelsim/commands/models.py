"""`accelsim models`: the built-in models (compiler.zoo), one line each; with a NAME, that model's options, their
defaults, the values each takes and what it does."""
from __future__ import annotations

import argparse

from accelsim.commands.command import Command


def add_models(models: argparse.ArgumentParser) -> None:
    models.add_argument("name", nargs="?", metavar="NAME", help="a built-in model: list its options, their defaults, "
                        "the values each takes and what it does")


def _models(args) -> int:
    from compiler.zoo import MODELS, model_function
    from compiler.zoo.options import describe

    if args.name is None:
        for name, fn in MODELS.items():
            doc = (fn.__doc__ or "").strip().splitlines()
            print(f"{name:14} {doc[0] if doc else ''}")
        return 0
    fn = model_function(args.name)
    print((fn.__doc__ or "").strip().splitlines()[0])
    rows = [("option", "default", "takes", "meaning")] + describe(fn)
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
    print("give each as --opt KEY=VALUE; batch, seq and dtype as --batch, --seq and --dtype; weights is the "
          "command's choice")
    return 0


COMMAND = Command("models", "list the built-in models; with a NAME, that model's options (--opt KEY=VALUE)", add_models,
                  _models)

"""`accelsim export`: write a built-in model to an .onnx file (accelsim/sim/model.py builds it, compiler/export.py
writes it)."""
from __future__ import annotations

import argparse

from accelsim.args import model_args, model_options
from accelsim.commands.command import Command


def add_export(ex: argparse.ArgumentParser) -> None:
    model_args(ex, default=None)
    ex.add_argument("--out", required=True, metavar="FILE.onnx", help="the ONNX file to write (weights inside, or "
                    "beside it as external data when large)")


def _export(args) -> int:
    from compiler.export import save_onnx
    from accelsim.sim.model import load_model

    graph = load_model(args.model, batch=args.batch, weights=True, **model_options(args))
    save_onnx(graph, args.out)
    print(f"wrote {args.out}: {len(graph.nodes)} nodes, "
          f"{sum(graph.tensors[w].elements for w in graph.weights):,} parameters")
    return 0


COMMAND = Command("export", "write a built-in model to an .onnx file", add_export, _export)

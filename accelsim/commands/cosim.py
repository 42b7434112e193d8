"""`accelsim cosim`: one layer through the Verilog systolic core in rtl/, compared tile by tile with the cycle-level
and tile-level models (accelsim/rtl/cosim.py); exit 1 when they differ."""
from __future__ import annotations

import argparse

from accelsim.args import model_args, model_options, positive
from accelsim.commands.command import Command
from accelsim.rtl.options import add_waveform_options

EXIT_MISMATCH = 1


def add_cosim(co: argparse.ArgumentParser) -> None:
    model_args(co, default=None)
    co.add_argument("--layer", required=True, metavar="NAME", help="a convolution or matrix layer (IR op or node name)")
    co.add_argument("--arch", default="systolic_8x8", help="a preset describing the RTL core (default: systolic_8x8)")
    co.add_argument("--sim", default="icarus", choices=["icarus", "verilator"], help="RTL simulator (default: icarus)")
    co.add_argument("--seed", type=int, default=0, help="seed of the random int8 input and weights (default 0)")
    add_waveform_options(co)
    co.add_argument("--tiles", type=int, default=12, metavar="N", help="tiles to list (default 12; totals cover all)")


def _cosim(args) -> int:
    from accelsim.rtl.cosim import cosim

    positive("batch", args.batch)
    report = cosim(args.model, args.layer, args.arch, sim=args.sim, batch=args.batch, seed=args.seed,
                   rtl_vcd=args.rtl_vcd, model_vcd=args.model_vcd, **model_options(args))
    print(report.text(limit=args.tiles))
    return EXIT_MISMATCH if report.mismatch else 0


COMMAND = Command("cosim", "run one layer through the Verilog systolic core in rtl/ and compare it, tile by tile, "
                  "with the cycle-level and tile-level models", add_cosim, _cosim)

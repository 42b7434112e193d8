"""`accelsim run`: simulate a model on an arch (or a system of devices) and print a per-layer report; the API is
accelsim/sim/api.py, the result accelsim/results/result.py."""
from __future__ import annotations

import argparse
import shutil
import sys

from accelsim.args import (many_devices, model_args, model_options, on_many_devices, positive, report_many, rows,
                           write)
from accelsim.commands.command import Command
from accelsim.sim import FIDELITIES


def add_run(run: argparse.ArgumentParser) -> None:
    model_args(run, default="resnet50")
    run.add_argument("--arch", default="tpu_v1", help="preset name (see `accelsim archs`), a YAML file or a "
                     "SCALE-Sim .cfg (default: tpu_v1)")
    run.add_argument("--dtype", help="the dtype the hardware computes in (default: the arch's native one)")
    run.add_argument("--fidelity", default="tile", choices=FIDELITIES, help="level of detail: tile "
                     "(map, compile and simulate the tile program; the default) or roofline (the per-op bound)")
    run.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace of the timeline (tile fidelity; "
                     "open it at ui.perfetto.dev)")
    run.add_argument("--json", metavar="FILE", help="write the result as JSON ('-' for stdout)")
    run.add_argument("--csv", metavar="FILE", help="write one row per op as CSV ('-' for stdout)")
    run.add_argument("--limit", type=int, metavar="N", help="show only the first N ops in the table (default: "
                     "up to 1,000; 0 for all)")
    run.add_argument("--wide", action="store_true", help="every column at full width, whatever the terminal's "
                     "width (by default the table fits it: names wrap, then the shape and op columns go)")
    run.add_argument("--compat", choices=["scalesim"], help="price matrix ops' compute_cycles as another "
                     "simulator does (scalesim: SCALE-Sim v3's total minus stall cycles, per layer)")
    run.add_argument("--fusion", default="runtime", choices=["runtime", "chains", "none"], help="runtime: ops "
                     "form kernels as the target's inference runtimes fuse them (a GEMM with its epilogue, "
                     "element-wise chains; the default); chains: element-wise chains only; none: every op a kernel "
                     "of its own")
    run.add_argument("--launch", choices=["eager", "graph"], help="eager: a launch per kernel; graph: one for a "
                     "captured graph, as CUDA graphs run it (default: graph for a decode step, else eager)")
    run.add_argument("--caches", default="warm", choices=["warm", "cold"], help="warm: the model's inputs and "
                     "outputs stay where activations live, as many as fit there together, as a repeated call finds "
                     "them (the default); cold: they are read from and written to DRAM, as a first call or a timing "
                     "that flushes the caches")
    run.add_argument("--html", metavar="FILE", help="write a self-contained HTML report (works offline)")
    many_devices(run)
    run.add_argument("--plot", metavar="DIR", help="write the report's figures as PNG files into DIR")


def _run(args) -> int:
    from accelsim.sim.api import run

    positive("batch", args.batch)
    positive("seq", args.seq)
    positive("devices", args.devices)
    rows("limit", args.limit)
    if on_many_devices(args, {"arch": "tpu_v1", "fidelity": "tile", "compat": None,
                              "plot": None, "limit": None, "wide": False, "fusion": "runtime", "launch": None,
                              "caches": "warm"}):
        return _run_many(args)
    result = run(args.model, arch=args.arch, batch=args.batch, dtype=args.dtype, fidelity=args.fidelity,
                 compat=args.compat, trace=bool(args.trace), fuse=args.fusion, launch=args.launch,
                 caches=args.caches, **model_options(args))
    if args.json:
        write(args.json, result.to_json())
    if args.csv:
        write(args.csv, result.to_csv())
    if args.trace:
        from accelsim.results.trace import write_trace

        write_trace(result, args.trace)
    if "-" not in (args.json, args.csv):
        width = None if args.wide else shutil.get_terminal_size((120, 24)).columns if sys.stdout.isatty() else 120
        print(result.table(args.limit, width), end="")
    if args.html or args.plot:
        _report_run(result, args)
    return 0


def _run_many(args) -> int:
    from accelsim.parallel.run import run_parallel

    result = run_parallel(args.model, args.system, devices=args.devices, slice=args.slice, parallel=args.parallel,
                          batch=args.batch, dtype=args.dtype, **model_options(args))
    report_many(result, args)
    return 0


def _report_run(result, args: argparse.Namespace) -> None:
    """`run --html FILE --plot DIR`: the page and/or the figures of a finished run."""
    from accelsim.report.run_page import run_report
    from accelsim.sim.model import load_arch

    arch = load_arch(args.arch)
    quiet = "-" in (args.json, args.csv)   # stdout carries JSON or CSV only
    for path in run_report(result, arch, html_path=args.html, plot_dir=args.plot):
        print(f"wrote {path}", file=sys.stderr if quiet else sys.stdout)


COMMAND = Command("run", "simulate a model on an arch and print a per-layer report", add_run, _run)

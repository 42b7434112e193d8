"""The `accelsim` command: run, eval, export, map, cosim, compare, train, plan, ops, archs, arch, models, explain,
sweep, validate.

Bad input ends in one line on stderr and exit status 2; never a traceback (an internal error says so,
exit 3, with the traceback behind ACCELSIM_DEBUG=1).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import traceback
import warnings
from pathlib import Path

from accelsim import __version__
from accelsim.collector import paused
from accelsim.args import (check_outputs, many_devices, model_args, model_options, on_many_devices, positive, rows,
                           report_many, write)
from accelsim.collective_cli import add_collective_parser
from accelsim.eval_cli import add_eval_parser
from accelsim.explain.cli import add_explain_parser
from accelsim.ops_cli import add_ops_parser
from accelsim.plan_cli import add_plan_parser
from accelsim.rtl.options import add_waveform_options
from accelsim.sweep.cli import add_sweep_parser
from accelsim.train_cli import add_train_parser
from accelsim.validate.cli import add_cuda_parser, add_onnx_parser, add_score_parser
from compiler.errors import UserError

EXIT_MISMATCH, EXIT_USAGE, EXIT_INTERNAL = 1, 2, 3


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
    """The whole command line, or, given `argv`, all of it but the `validate` actions unless argv's command is
    validate: declaring them imports the CUDA harness and onnx's conformance cases (~1.5 s)."""
    command = None if argv is None else next((arg for arg in argv if not arg.startswith("-")), "")
    parser = argparse.ArgumentParser(prog="accelsim", description="Simulate AI models on accelerators "
                                     "described in YAML.")
    parser.add_argument("--version", action="version", version=f"accelsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="simulate a model on an arch and print a per-layer report")
    model_args(run, default="resnet50")
    run.add_argument("--arch", default="tpu_v1",
                     help="preset name (see `accelsim archs`), a YAML file or a SCALE-Sim .cfg (default: tpu_v1)")
    run.add_argument("--dtype", help="the dtype the hardware computes in (default: the arch's native one)")
    run.add_argument("--fidelity", default="tile", choices=["tile", "roofline"], help="level of detail: tile "
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
    run.set_defaults(handler=_run)

    add_eval_parser(sub)

    ex = sub.add_parser("export", help="write a built-in model to an .onnx file")
    model_args(ex, default=None)
    ex.add_argument("--out", required=True, metavar="FILE.onnx", help="the ONNX file to write (weights inside, or "
                    "beside it as external data when large)")
    ex.set_defaults(handler=_export)

    mp = sub.add_parser("map", help="print each layer's chosen mapping as a loop nest per memory level")
    model_args(mp, default=None)
    mp.add_argument("--arch", default="tpu_v1", help="preset name or a YAML file (default: tpu_v1)")
    mp.add_argument("--layer", metavar="NAME", help="only this layer (an IR op or graph node name)")
    mp.add_argument("--dtype", help="the dtype the hardware computes in (default: the arch's native one)")
    mp.add_argument("--budget", type=int, metavar="N",
                    help="mapping candidates costed per op (on a PE array: each tiling once, then N - 1 more)")
    mp.set_defaults(handler=_map)

    co = sub.add_parser("cosim", help="run one layer through the Verilog systolic core in rtl/ and compare it, "
                        "tile by tile, with the cycle-level and tile-level models")
    model_args(co, default=None)
    co.add_argument("--layer", required=True, metavar="NAME", help="a convolution or matrix layer (IR op or node name)")
    co.add_argument("--arch", default="systolic_8x8", help="a preset describing the RTL core (default: systolic_8x8)")
    co.add_argument("--sim", default="icarus", choices=["icarus", "verilator"], help="RTL simulator (default: icarus)")
    co.add_argument("--seed", type=int, default=0, help="seed of the random int8 input and weights (default 0)")
    add_waveform_options(co)
    co.add_argument("--tiles", type=int, default=12, metavar="N", help="tiles to list (default 12; totals cover all)")
    co.set_defaults(handler=_cosim)

    add_compare_parser(sub)
    add_train_parser(sub)
    add_plan_parser(sub)
    add_ops_parser(sub)
    add_collective_parser(sub)
    sub.add_parser("archs", help="list the hardware presets").set_defaults(handler=_archs)
    arch = sub.add_parser("arch", help="work with arch files").add_subparsers(dest="arch_command",
                                                                             metavar="ACTION", required=True)
    convert = arch.add_parser("convert", help="write the arch YAML equivalent to a SCALE-Sim .cfg")
    convert.add_argument("cfg", metavar="FILE.cfg", help="a SCALE-Sim config file")
    convert.add_argument("--out", metavar="FILE.yaml", help="where to write it (default: stdout)")
    convert.set_defaults(handler=_arch_convert)
    detect = arch.add_parser("detect-host", help="write a simd preset for this machine (lscpu, /proc, sysfs)")
    detect.add_argument("--out", metavar="FILE.yaml", help="where to write it (default: stdout)")
    detect.set_defaults(handler=_arch_detect_host)
    models = sub.add_parser("models", help="list the built-in models; with a NAME, that model's options "
                            "(--opt KEY=VALUE)")
    models.add_argument("name", nargs="?", metavar="NAME", help="a built-in model: list its options, their defaults, "
                        "the values each takes and what it does")
    models.set_defaults(handler=_models)
    add_explain_parser(sub)
    add_sweep_parser(sub)
    validate = sub.add_parser("validate", help="measure real hardware and score the model against it") \
        .add_subparsers(dest="validate_command", metavar="ACTION", required=True)
    if command in (None, "validate"):
        _add_validate_parsers(validate)
    _describe(parser)
    return parser


def _add_validate_parsers(validate) -> None:
    """`validate score`, `validate cuda`, `validate onnx` and `validate cpu` under the `validate` subparsers group."""
    add_score_parser(validate)
    add_cuda_parser(validate)
    add_onnx_parser(validate)
    cpu = validate.add_parser("cpu", help="time GEMMs (numpy), convolutions and training steps (torch) on this "
                              "machine and write them beside accelsim's predictions")
    cpu.add_argument("--suite", default="all", help="gemm, conv, train (forward, backward and optimizer of small "
                     "models) or all (default: all)")
    cpu.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads, and cores the model prices "
                     "(default 1)")
    cpu.add_argument("--repeats", type=int, default=7, help="timed samples per case, median kept (default 7; "
                     "at most 3 for cases over 0.3 s)")
    cpu.add_argument("--out", metavar="DIR", help="a new or empty dataset folder (default: a new folder "
                     "<host preset name>-<date>-<time> here)")
    cpu.add_argument("--arch", help="price on this preset or YAML file as it is (default: the host's, detected, "
                     "with --threads cores)")
    cpu.set_defaults(handler=_validate_cpu, folders=("out",))


def _describe(parser: argparse.ArgumentParser) -> None:
    """Every subcommand's own --help opens with the line its parent lists it with."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                sub.description = sub.description or helps.get(name)
                _describe(sub)


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


def _export(args) -> int:
    from compiler.export import save_onnx
    from accelsim.sim.model import load_model

    graph = load_model(args.model, batch=args.batch, weights=True, **model_options(args))
    save_onnx(graph, args.out)
    print(f"wrote {args.out}: {len(graph.nodes)} nodes, "
          f"{sum(graph.tensors[w].elements for w in graph.weights):,} parameters")
    return 0


def _map(args) -> int:
    import difflib

    from accelsim.explain.array_use import array_use
    from accelsim.price.cost import reporter, traffic
    from accelsim.sim.build import build

    positive("batch", args.batch)
    positive("budget", args.budget)
    compiled = build(args.model, args.arch, batch=args.batch, dtype=args.dtype, budget=args.budget,
                     **model_options(args))
    ir, arch = compiled.ir, compiled.arch
    ops = [op for op in ir.ops if args.layer in (None, op.name, op.node)]
    if not ops:
        names = list(dict.fromkeys(n for op in ir.ops for n in (op.node, op.name)))
        close = difflib.get_close_matches(args.layer, names, n=5, cutoff=0.5)
        hint = f"close matches: {', '.join(close)}" if close else f"layers include {', '.join(names[:6])}, ..."
        raise UserError(f"no layer {args.layer!r} in {ir.name}; {hint}")
    report = reporter(arch, ir, compiled.pricing)
    for op in ops:
        mapping = compiled.mappings[op.name]
        if op.kind.value != "einsum":      # a vector op's chunk plan, as simulated
            print(f"{mapping.text()}\n")
            continue
        moved = ", ".join(f"{name} {n:,} B" for name, n in traffic(mapping, op, arch).items())
        estimate = report(mapping)
        why = "".join(f"\n{line}" for line in array_use(mapping, op, arch, estimate, compiled.pricing))
        print(f"{mapping.text()}\n# estimate: {estimate:,.0f} cycles; traffic: {moved or 'none'}{why}\n")
    return 0


def _cosim(args) -> int:
    from accelsim.rtl.cosim import cosim

    positive("batch", args.batch)
    report = cosim(args.model, args.layer, args.arch, sim=args.sim, batch=args.batch, seed=args.seed,
                   rtl_vcd=args.rtl_vcd, model_vcd=args.model_vcd, **model_options(args))
    print(report.text(limit=args.tiles))
    return EXIT_MISMATCH if report.mismatch else 0


def _arch_convert(args) -> int:
    from accelsim.sim.model import load_arch
    from accelsim.importers.scalesim import convert

    if args.out and not args.out.endswith((".yaml", ".yml")):
        raise UserError(f"--out {args.out}: an arch file must end in .yaml")
    text = convert(args.cfg)
    write(args.out or "-", text)
    if args.out:
        arch = load_arch(args.out)   # what we wrote must load as any preset does
        print(f"wrote {args.out}: {arch.name}, {arch.matrix.array.rows}x{arch.matrix.array.cols} "
              f"{arch.matrix.dataflows[0].value.upper()}")
    return 0


def _arch_detect_host(args) -> int:
    from accelsim.arch import load_arch, load_arch_text
    from accelsim.importers.host import read_host
    from accelsim.importers.host_preset import preset_yaml

    if args.out and not args.out.endswith((".yaml", ".yml")):
        raise UserError(f"--out {args.out}: an arch file must end in .yaml")
    text = preset_yaml(read_host())
    if not args.out:
        load_arch_text(text, "detect-host", Path("detect-host.yaml"))   # checked before it is shown
        write("-", text)
        return 0
    write(args.out, text)
    arch = load_arch(args.out)   # what we wrote must load as any preset does
    print(f"wrote {args.out}: {arch.name}, {arch.matrix.count} cores, {arch.clock_hz / 1e9:.2f} GHz, "
          f"{', '.join(u.name for u in arch.matrix_units)}")
    return 0


def _validate_cpu(args) -> int:
    from accelsim.validate.cpu import validate_cpu

    validate_cpu(args.suite, args.threads, args.repeats, args.out, args.arch)
    return 0


def _archs(args) -> int:
    from accelsim.arch import load_arch, preset_names
    from accelsim.arch.system_load import load_system, system_names
    from accelsim.results.units import bandwidth, binary, si

    for name in preset_names():
        arch = load_arch(name)
        native = arch.native_dtype
        levels = " > ".join(f"{lv.name} {binary(lv.capacity_total)}" for lv in arch.memory)
        print(f"{name:14} {arch.kind.value:9} {si(arch.matrix.peak_per_second(native) * 2, 'OP/s')} "
              f"{native.value:8} {si(arch.power.tdp_w, 'W'):>7}  {levels}")
    for name in system_names():
        system = load_system(name)
        links = " > ".join(f"{lv.name} {lv.topology.value} {bandwidth(lv.ports * lv.bandwidth_bytes_per_s)}"
                           for lv in system.levels)
        devices = f"{system.devices.default} x {system.device.name}"
        print(f"{name:14} {'system':9} {devices:14} {links} (per device, each way)")
    return 0


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


def add_compare_parser(sub) -> None:
    """`compare`: one model on several archs, side by side (the page and figures are accelsim.report's)."""
    cmp = sub.add_parser("compare", help="one model on several archs side by side: time, the share spent waiting "
                         "on each memory level, bytes and energy per level, per op and in total")
    model_args(cmp, default=None)
    cmp.add_argument("--arch", action="append", required=True, metavar="ARCH",
                     help="a preset name or YAML file; give two or more (the first is the baseline)")
    cmp.add_argument("--dtype", help="the dtype the hardware computes in (default: each arch's native one)")
    cmp.add_argument("--limit", type=int, metavar="N", help="show only the first N ops of each arch's table")
    cmp.add_argument("--html", metavar="FILE", help="write a self-contained HTML report (works offline)")
    cmp.add_argument("--plot", metavar="DIR", help="write the report's figures as PNG files into DIR")
    cmp.set_defaults(handler=_compare)


def _compare(args: argparse.Namespace) -> int:
    from accelsim.report.compare import compare_report, compare_text
    from accelsim.sim.api import compare
    from accelsim.sim.model import load_arch

    positive("batch", args.batch)
    positive("seq", args.seq)
    positive("limit", args.limit)
    if len(args.arch) < 2:
        raise UserError(f"compare needs two or more --arch (got only {args.arch[0]!r}); e.g. --arch tpu_v1 "
                        "--arch examples/archs/tpu_v1_gddr5.yaml")
    archs = [load_arch(a) for a in args.arch]
    options = model_options(args)
    results = compare(args.model, archs, batch=args.batch, dtype=args.dtype, **options)
    print(compare_text(results, args.limit), end="")
    if args.html or args.plot:
        for path in compare_report(results, archs, html_path=args.html, plot_dir=args.plot):
            print(f"wrote {path}")
    return 0


def _report_run(result, args: argparse.Namespace) -> None:
    """`run --html FILE --plot DIR`: the page and/or the figures of a finished run."""
    from accelsim.report.run_page import run_report
    from accelsim.sim.model import load_arch

    arch = load_arch(args.arch)
    quiet = "-" in (args.json, args.csv)   # stdout carries JSON or CSV only
    for path in run_report(result, arch, html_path=args.html, plot_dir=args.plot):
        print(f"wrote {path}", file=sys.stderr if quiet else sys.stdout)




if __name__ == "__main__":
    sys.exit(main())

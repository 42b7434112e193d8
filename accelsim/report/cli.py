"""The command line of the reports: the `compare` subcommand, and what `run --html/--plot` writes.

accelsim.cli registers `compare` with one call (add_compare_parser) and hands a finished run to `report_run`.
The model arguments are accelsim.cli's own (imported when the parser is built, after accelsim.cli has
loaded), so `compare` takes exactly what `run` takes.
"""
from __future__ import annotations

import argparse
import sys

from compiler.errors import UserError


def add_compare_parser(sub) -> None:
    from accelsim import cli

    cmp = sub.add_parser("compare", help="one model on several archs side by side: time, the share spent waiting "
                         "on each memory level, bytes and energy per level, per op and in total")
    cli._model_args(cmp, default=None)
    cmp.add_argument("--arch", action="append", required=True, metavar="ARCH",
                     help="a preset name or YAML file; give two or more (the first is the baseline)")
    cmp.add_argument("--dtype", help="the dtype the hardware computes in (default: each arch's native one)")
    cmp.add_argument("--limit", type=int, metavar="N", help="show only the first N ops of each arch's table")
    cmp.add_argument("--html", metavar="FILE", help="write a self-contained HTML report (works offline)")
    cmp.add_argument("--plot", metavar="DIR", help="write the report's figures as PNG files into DIR")
    cmp.set_defaults(handler=_compare)


def _compare(args: argparse.Namespace) -> int:
    from accelsim import cli
    from accelsim.sim.model import load_arch
    from accelsim.report.compare import compare, compare_report, compare_text

    cli._positive("batch", args.batch)
    cli._positive("seq", args.seq)
    cli._positive("limit", args.limit)
    if len(args.arch) < 2:
        raise UserError(f"compare needs two or more --arch (got only {args.arch[0]!r}); e.g. --arch tpu_v1 "
                        "--arch examples/archs/tpu_v1_gddr5.yaml")
    archs = [load_arch(a) for a in args.arch]
    options = cli._model_options(args)
    results = compare(args.model, archs, batch=args.batch, dtype=args.dtype, **options)
    print(compare_text(results, args.limit), end="")
    if args.html or args.plot:
        nests = [_nests(args.model, arch, args.batch, args.dtype, None, options) for arch in archs] \
            if args.html else None
        for path in compare_report(results, archs, nests, html_path=args.html, plot_dir=args.plot):
            print(f"wrote {path}")
    return 0


def report_run(result, args: argparse.Namespace) -> None:
    """`run --html FILE --plot DIR`: the page and/or the figures of a finished run."""
    from accelsim import cli
    from accelsim.sim.model import load_arch
    from accelsim.report.run_page import run_report

    arch = load_arch(args.arch)
    nests = _nests(args.model, arch, args.batch, args.dtype, args.compat, cli._model_options(args)) \
        if args.html and result.fidelity == "tile" else None
    quiet = "-" in (args.json, args.csv)   # stdout carries JSON or CSV only
    for path in run_report(result, arch, nests, html_path=args.html, plot_dir=args.plot):
        print(f"wrote {path}", file=sys.stderr if quiet else sys.stdout)


def _nests(model, arch, batch, dtype, compat, options: dict) -> dict[str, str]:
    from accelsim.report.nests import loop_nests

    return loop_nests(model, arch, batch=batch, dtype=dtype, compat=compat, **options)

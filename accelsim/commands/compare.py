"""`accelsim compare`: one model on several archs, side by side (accelsim/sim/api.py prices them; the page and
figures are accelsim/report/compare.py's)."""
from __future__ import annotations

import argparse

from accelsim.args import model_args, model_options, positive
from accelsim.commands.command import Command
from compiler.errors import UserError


def add_compare(cmp: argparse.ArgumentParser) -> None:
    model_args(cmp, default=None)
    cmp.add_argument("--arch", action="append", required=True, metavar="ARCH",
                     help="a preset name or YAML file; give two or more (the first is the baseline)")
    cmp.add_argument("--dtype", help="the dtype the hardware computes in (default: each arch's native one)")
    cmp.add_argument("--limit", type=int, metavar="N", help="show only the first N ops of each arch's table")
    cmp.add_argument("--html", metavar="FILE", help="write a self-contained HTML report (works offline)")
    cmp.add_argument("--plot", metavar="DIR", help="write the report's figures as PNG files into DIR")


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


COMMAND = Command("compare", "one model on several archs side by side: time, the share spent waiting on each memory "
                  "level, bytes and energy per level, per op and in total", add_compare, _compare)

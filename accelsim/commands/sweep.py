"""`accelsim sweep SPEC.yaml`: run or resume a design-space sweep, then print each model's Pareto-optimal points.

Everything that can be wrong with the spec or the
options is a UserError (exit 2) raised before the first point is evaluated.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from accelsim.commands.command import Command
from accelsim.results.units import plain
from compiler.errors import UserError

EXIT_INTERRUPTED = 130   # as accelsim/cli.py answers Ctrl-C elsewhere
HELP = "evaluate a design space (axes by arch key path) and print the Pareto-optimal points per model"


def add_sweep(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC.yaml", help="the sweep spec (see examples/sweep/)")
    p.add_argument("--db", metavar="FILE", help="SQLite results file (default: the spec's name with .sqlite, in "
                   "the current folder)")
    p.add_argument("--jobs", type=int, metavar="N", help="local worker processes (default: the CPUs this process "
                   "may use; 1 evaluates in this process)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="run on a Dask distributed cluster instead, e.g. "
                   "tcp://10.0.0.5:8786 (its workers need accelsim installed)")
    p.add_argument("--html", metavar="FILE", help="write a report page with the Pareto plot (accelsim.report)")
    p.add_argument("--plot", metavar="DIR", help="write the report's figures as PNG files (accelsim.report)")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def sweep_command(args) -> int:
    from accelsim.sweep.runner import run_sweep
    from accelsim.sweep.spec import OBJECTIVES, load_spec
    from accelsim.sweep.store import sweep_rows
    from accelsim.sweep.pareto import pareto

    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs {args.jobs}: must be a positive integer")
    if args.jobs is not None and args.scheduler:
        raise UserError("--jobs and --scheduler: give one (the cluster has its own workers)")
    report = _report_hook(args)   # checked before anything runs
    spec = load_spec(args.spec)
    db = Path(args.db) if args.db else Path.cwd() / f"{spec.path.stem}.sqlite"   # here, not beside the spec
    try:
        summary = run_sweep(spec, db, jobs=args.jobs, scheduler=args.scheduler, progress=not args.quiet)
    except KeyboardInterrupt:
        print(f"accelsim: sweep interrupted; finished rows are in {db}; run the same command to resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    rows = sweep_rows(db, list(summary.keys))
    best = pareto(rows, spec.objectives)
    models = f"{len(spec.models)} model{'s' if len(spec.models) != 1 else ''}"
    print(f"sweep {spec.path}: {summary.points} points x {models} = {len(summary.keys)} rows in "
          f"{db} ({summary.evaluated} evaluated, {summary.reused} already stored, {summary.not_ok} not ok) in "
          f"{summary.seconds:.1f} s on {summary.workers} worker{'s' if summary.workers != 1 else ''}; strategy "
          f"{spec.strategy.kind}")
    if summary.stale:
        print(f"note: {summary.stale} of the stored rows were computed by other accelsim code than this one; "
              f"to recompute them, sweep into a new file (--db)")
    print(pareto_table(spec, rows, best), end="")
    if report is not None:
        # the page takes every key that is not model/status/reason/an objective for a parameter column
        keep = [axis.key for axis in spec.axes] + ["model", *spec.objectives, "status", "reason"]
        shown = {id(row): {k: row.get(k) for k in keep} for row in rows}
        written = report([shown[id(r)] for r in rows], [shown[id(r)] for r in best], list(spec.objectives),
                         html=args.html, plot_dir=args.plot, units={o: OBJECTIVES[o][0] for o in spec.objectives})
        for what in written if isinstance(written, list) else [p for p in (args.html, args.plot) if p]:
            print(f"wrote {what}")
    return 0


def _report_hook(args):
    if not (args.html or args.plot):
        return None
    try:
        from accelsim.report import sweep_report
    except ImportError:
        raise UserError(f"{'--html' if args.html else '--plot'} needs accelsim.report") from None
    return sweep_report


def pareto_table(spec, rows: list[dict], best: list[dict]) -> str:
    """Per model: how many rows are valid, then its Pareto-optimal points, axis values and objectives."""
    from accelsim.sweep.spec import OBJECTIVES
    from accelsim.results.units import engineering

    names = short_names([axis.key for axis in spec.axes])
    out = []
    for model in spec.models:
        mine = [r for r in rows if r["model"] == model.label]
        front = [r for r in best if r["model"] == model.label]
        valid = sum(r["status"] == "ok" for r in mine)
        out.append(f"\nPareto-optimal for {model.label} ({', '.join(spec.objectives)}): {len(front)} of {valid} "
                   f"valid points ({len(mine) - valid} not ok)")
        reasons: dict[str, int] = {}
        for r in mine:
            if r["status"] != "ok":
                reasons[r["reason"] or r["status"]] = reasons.get(r["reason"] or r["status"], 0) + 1
        for reason, n in sorted(reasons.items(), key=lambda item: -item[1])[:3]:
            out.append(f"  {n} not ok: {reason}")
        if not front:
            continue
        header = [*names, *spec.objectives]
        lines = [header] + [[cell_text(r.get(a.key)) for a in spec.axes] +
                            [engineering(r[o], OBJECTIVES[o][0]) for o in spec.objectives] for r in front]
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        out += ["  " + "  ".join(c.rjust(w) for c, w in zip(line, widths)) for line in lines]
    return "\n".join(out) + "\n"


def short_names(keys: list[str]) -> list[str]:
    """The shortest dotted suffix of each key path that no other key path shares (array.rows, dram.bandwidth)."""
    out = []
    for key in keys:
        parts = key.split(".")
        for n in range(min(2, len(parts)), len(parts) + 1):
            suffix = ".".join(parts[-n:])
            if sum(k == suffix or k.endswith("." + suffix) for k in keys) == 1:
                break
        out.append(suffix)
    return out


def cell_text(value: object) -> str:
    """A swept value as the table shows it: plain units (accelsim.results.units.plain), a list comma-separated."""
    if isinstance(value, list):
        return ",".join(map(plain, value))
    return plain(value)


COMMAND = Command("sweep", HELP, add_sweep, sweep_command, description=HELP + ". Rerunning the same command resumes: "
                  "rows already in the results file are not evaluated again.")

"""`accelsim validate score`: a table per dataset and suite, and exit 1 when a target is missed (like a failed test).

accelsim/cli.py adds this under its `validate` group with add_score_parser(validate); bad input is a UserError there
(exit 2).
"""
from __future__ import annotations

import argparse
import math

EXIT_MISSED = 1


def add_score_parser(group) -> argparse.ArgumentParser:
    """`score` under the `validate` subparsers group."""
    p = group.add_parser("score", help="score validation datasets: the model's error against measured times, "
                         "per suite, against each suite's target")
    p.add_argument("paths", nargs="+", metavar="FILE", help="a dataset folder (measurements.csv, dataset.yaml, "
                   "arch.yaml) or its measurements.csv")
    p.add_argument("--plot", metavar="OUT.png", help="write a log-log plot of predicted against measured times")
    p.add_argument("--as-recorded", action="store_true", help="score the CSV's predicted_s column instead of "
                   "predicting every case again with the current model on the dataset's arch.yaml")
    p.set_defaults(handler=score_command)
    return p


def score_command(args) -> int:
    from accelsim.validate.score import plot, score

    scores = score(args.paths, repredict=not args.as_recorded)
    for s in scores:
        how = "as recorded" if not s.repredicted else "predicted again by the current model on its arch.yaml"
        print(f"{s.dataset.name}: {len(s.dataset.rows)} cases, {how}")
        print(table(s.suites))
    misses = [m for s in scores for m in s.misses]
    for miss in misses:
        print(f"MISS {miss.text()}")
    if args.plot:
        print(f"wrote {plot(scores, args.plot)}")
    return EXIT_MISSED if misses else 0


def table(suites) -> str:
    header = ("suite", "n", "MAPE", "median", "worst", "worst case", "Spearman", "target", "")
    lines = [header]
    for s in suites:
        m = s.metrics
        verdict = "-" if s.target.report_only else ("MISS" if s.misses else "PASS")
        rho = "n/a" if math.isnan(m["spearman"]) else f"{m['spearman']:.3f}"
        lines.append((s.suite, str(m["count"]), f"{m['mape']:.1%}", f"{m['median']:.1%}", f"{m['worst']:.1%}",
                      m["worst_case"] or "", rho, s.target.text(), verdict))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    right = {1, 2, 3, 4, 6}   # numbers align right
    return "\n".join("  " + "  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                                      for i, (cell, w) in enumerate(zip(line, widths))).rstrip() for line in lines)

"""`accelsim validate score`, `validate cuda`, `validate onnx` and `validate cpu`: score prints a table per
dataset and suite and exits 1 when a target is missed (like a failed test); cuda exits 1 when a generated kernel
disagrees with the vendor library; onnx runs onnx's conformance node cases through the reference interpreter
(compiler/conformance.py) and exits 1 when a case mismatches or crashes; cpu times GEMMs, convolutions and training
steps on this machine (accelsim/validate/cpu.py). Bad input is a UserError (exit 2).
"""
from __future__ import annotations

import argparse
import math

from accelsim.commands.command import Command
from compiler.errors import UserError

EXIT_MISSED = 1


def add_score_parser(group) -> argparse.ArgumentParser:
    """`score` under the `validate` subparsers group."""
    p = group.add_parser("score", help="score validation datasets: the model's error against measured times, "
                         "per suite, against each suite's target")
    p.add_argument("paths", nargs="+", metavar="FILE", help="a dataset folder (measurements.csv, dataset.yaml, "
                   "arch.yaml) or its measurements.csv; or validation/collectives (published.csv, dataset.yaml), "
                   "scored on nccl-tests' bus bandwidth; or validation/published (published GPU kernel times, "
                   "each row on its own preset)")
    p.add_argument("--plot", metavar="OUT.png", help="write a log-log plot of predicted against measured times")
    p.add_argument("--as-recorded", action="store_true", help="score the CSV's predicted_s column instead of "
                   "predicting every case again with the current model on the dataset's arch.yaml")
    p.set_defaults(handler=score_command, folders=())   # --plot names a .png here
    return p


def score_command(args) -> int:
    from accelsim.validate import collectives, published_gpu, published_workloads
    from accelsim.validate.score import plot, score

    scores = score(args.paths, repredict=not args.as_recorded)
    for s in scores:
        published = published_gpu.is_dataset(s.dataset.folder) or published_workloads.is_dataset(s.dataset.folder)
        on = "the system presets, on busbw" if collectives.is_dataset(s.dataset.folder) else \
            "the preset each row names" if published else "its arch.yaml"
        how = "as recorded" if not s.repredicted else f"predicted again by the current model on {on}"
        print(f"{s.dataset.name}: {len(s.dataset.rows)} cases, {how}")
        if published:
            print(row_table(s))
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


def row_table(s) -> str:
    """A line per row (measured and predicted microseconds, their ratio, the error), then per suite the geometric
    mean of measured / predicted (above 1: accelsim predicts too fast)."""
    lines = [f"  {'suite':<18} {'case':<34} {'measured us':>12} {'predicted us':>12} {'meas/pred':>9} {'error':>7}"]
    ratios: dict[str, list[float]] = {}
    for r, predicted in zip(s.dataset.rows, s.predicted_s):
        ratios.setdefault(r.suite, []).append(r.measured_s / predicted)
        lines.append(f"  {r.suite:<18} {r.case:<34} {r.measured_s * 1e6:>12.2f} {predicted * 1e6:>12.2f} "
                     f"{r.measured_s / predicted:>9.3f} {abs(predicted - r.measured_s) / r.measured_s:>7.1%}")
    lines += [f"  {suite}: geometric mean of measured / predicted {math.exp(sum(map(math.log, x)) / len(x)):.3f}"
              for suite, x in ratios.items()]
    return "\n".join(lines)


def add_cuda_parser(group) -> argparse.ArgumentParser:
    """`cuda` under the `validate` subparsers group."""
    from accelsim.validate.cuda_dataset import DEFAULT_BUDGET_S
    from accelsim.validate.cuda_suites import SUITES

    p = group.add_parser("cuda", help="time cases on an NVIDIA GPU through the vendor library (PyTorch) and "
                         "through accelsim's generated Triton kernels, beside accelsim's predictions")
    p.add_argument("--arch", default="h200", help="the simt preset or YAML file the predictions are for "
                   "(default: h200)")
    p.add_argument("--suite", default="all", help=f"{', '.join(SUITES)} or all (default: all; smoke is a "
                   "handful of small cases for checking the harness)")
    p.add_argument("--case", action="append", default=[], metavar="KEY", help="measure this case instead of a suite "
                   "(repeatable; suite 'custom'), e.g. --case 'gemm 4096 4096 4096 bf16' (keys: docs/validation.md)")
    p.add_argument("--out", metavar="DIR", help="a new or empty dataset folder for measurements.csv, dataset.yaml "
                   "and arch.yaml (default: a new folder cuda-<arch>-<date>-<time> here)")
    p.add_argument("--repeats", type=int, default=25, help="timed runs per case and library after 5 warm-ups, "
                   "median kept (default 25)")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS", help="stop starting new "
                   f"cases after this long; every finished case is kept (default {DEFAULT_BUDGET_S})")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu-interpreter"], help="cuda (default), or "
                   "cpu-interpreter: the same harness on this host under Triton's interpreter, to check it "
                   "without a GPU (its times mean nothing)")
    p.set_defaults(handler=cuda_command, folders=("out",))
    return p


def cuda_command(args) -> int:
    from accelsim.validate.cuda_dataset import validate_cuda

    if args.budget is not None and not args.budget > 0:
        raise UserError(f"--budget {args.budget}: must be a positive number of seconds")
    return validate_cuda(args.suite, args.arch, args.out, args.repeats, args.budget, args.device, args.case)


def add_onnx_parser(group) -> argparse.ArgumentParser:
    """`onnx` under the `validate` subparsers group."""
    from compiler.conformance import add_arguments

    p = group.add_parser("onnx", help="run every node case of the installed onnx's conformance set through the "
                         "reference interpreter and count pass / refused / mismatch / crash (docs/onnx.md)")
    add_arguments(p)
    p.set_defaults(handler=onnx_command)
    return p


def onnx_command(args) -> int:
    from compiler.conformance import check

    text, clean = check(args.op, args.list, args.all_ops)
    print(text, end="")
    return 0 if clean else EXIT_MISSED


def add_cpu_parser(validate) -> None:
    """`cpu` under the `validate` subparsers group."""
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
    cpu.set_defaults(handler=cpu_command, folders=("out",))


def cpu_command(args) -> int:
    from accelsim.validate.cpu import validate_cpu

    validate_cpu(args.suite, args.threads, args.repeats, args.out, args.arch)
    return 0


def add_validate(parser: argparse.ArgumentParser) -> None:
    """`validate score`, `validate cuda`, `validate onnx` and `validate cpu`."""
    actions = add_actions(parser)
    add_score_parser(actions)
    add_cuda_parser(actions)
    add_onnx_parser(actions)
    add_cpu_parser(actions)


def add_actions(parser: argparse.ArgumentParser):
    """The `validate` ACTION group, empty: what is declared when another command is asked for."""
    return parser.add_subparsers(dest="validate_command", metavar="ACTION", required=True)


COMMAND = Command("validate", "measure real hardware and score the model against it", add_validate,
                  add_cheap=add_actions)

"""The `accelsim` command: run, eval, export, archs, models.

Bad input ends in one line on stderr and exit status 2; never a traceback (an internal error says so,
exit 3, with the traceback behind ACCELSIM_DEBUG=1).
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

from compiler.errors import UserError

EXIT_USAGE, EXIT_INTERNAL = 2, 3


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 0
    try:
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="accelsim", description="Simulate AI models on accelerators "
                                     "described in YAML.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="simulate a model on an arch and print a per-layer report")
    _model_args(run, default="resnet50")
    run.add_argument("--arch", default="tpu_v1", help="preset name (see `accelsim archs`) or a YAML file "
                     "(default: tpu_v1)")
    run.add_argument("--dtype", help="the dtype the hardware computes in (default: the arch's native one)")
    run.add_argument("--fidelity", default="roofline", choices=["roofline"], help="level of detail")
    run.add_argument("--json", metavar="FILE", help="write the result as JSON ('-' for stdout)")
    run.add_argument("--csv", metavar="FILE", help="write one row per op as CSV ('-' for stdout)")
    run.add_argument("--limit", type=int, metavar="N", help="show only the first N ops in the table")
    run.set_defaults(handler=_run)

    ev = sub.add_parser("eval", help="run a model's numerics in the numpy reference interpreter")
    _model_args(ev, default=None)
    ev.add_argument("--inputs", metavar="IN.npz", help="input arrays keyed by graph input name "
                    "(default: random, seeded)")
    ev.add_argument("--out", metavar="OUT.npz", help="write output arrays keyed by graph output name")
    ev.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    ev.set_defaults(handler=_eval)

    ex = sub.add_parser("export", help="write a built-in model to an .onnx file")
    _model_args(ex, default=None)
    ex.add_argument("--out", required=True, metavar="FILE.onnx")
    ex.set_defaults(handler=_export)

    sub.add_parser("archs", help="list the hardware presets").set_defaults(handler=_archs)
    sub.add_parser("models", help="list the built-in models").set_defaults(handler=_models)
    return parser


def _model_args(p: argparse.ArgumentParser, default: str | None) -> None:
    p.add_argument("model", nargs=None if default is None else "?", default=default,
                   help="a built-in model (see `accelsim models`) or an .onnx file"
                   + (f" (default: {default})" if default else ""))
    p.add_argument("--batch", type=int, help="batch size")
    p.add_argument("--seq", type=int, help="sequence length (language models)")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="a built-in model's own option, e.g. --opt mode=decode --opt past=512 --opt layers=2")


def _model_options(args) -> dict:
    options = {}
    if args.seq is not None:
        options["seq"] = args.seq
    for item in args.opt:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--opt {item!r}: expected KEY=VALUE")
        options[key] = _literal(value)
    return options


def _literal(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise UserError(f"--{name} {value}: must be a positive integer")


def _run(args) -> int:
    from accelsim.api import run

    _positive("batch", args.batch)
    _positive("seq", args.seq)
    result = run(args.model, arch=args.arch, batch=args.batch, dtype=args.dtype, fidelity=args.fidelity,
                 **_model_options(args))
    if args.json:
        _write(args.json, result.to_json())
    if args.csv:
        _write(args.csv, result.to_csv())
    if "-" not in (args.json, args.csv):
        print(result.table(args.limit), end="")
    return 0


def _eval(args) -> int:
    import numpy as np

    from accelsim.api import evaluate

    _positive("batch", args.batch)
    inputs = None
    if args.inputs:
        path = Path(args.inputs)
        try:
            with np.load(path, allow_pickle=False) as data:
                inputs = {key: data[key] for key in data.files}
        except (OSError, ValueError) as error:
            raise UserError(f"{path}: cannot read input arrays ({error})") from None
    feeds, outputs = evaluate(args.model, inputs=inputs, seed=args.seed, batch=args.batch, **_model_options(args))
    for name, value in outputs.items():
        print(f"{name}: shape {list(value.shape)} {value.dtype}, mean {float(np.mean(value)):.6g}, "
              f"std {float(np.std(value)):.6g}")
    if args.out:
        try:
            np.savez(args.out, **outputs)
        except OSError as error:
            raise UserError(f"{args.out}: cannot write ({error.strerror})") from None
        print(f"wrote {len(outputs)} arrays to {args.out}")
    return 0


def _export(args) -> int:
    from compiler.export import save_onnx
    from accelsim.model import load_model

    graph = load_model(args.model, batch=args.batch, weights=True, **_model_options(args))
    save_onnx(graph, args.out)
    print(f"wrote {args.out}: {len(graph.nodes)} nodes, "
          f"{sum(graph.tensors[w].elements for w in graph.weights):,} parameters")
    return 0


def _archs(args) -> int:
    from accelsim.arch import load_arch, preset_names
    from accelsim.table import binary, si

    for name in preset_names():
        arch = load_arch(name)
        native = arch.native_dtype
        levels = " > ".join(f"{lv.name} {binary(lv.capacity_total)}" for lv in arch.memory)
        print(f"{name:14} {arch.kind.value:9} {si(arch.matrix.peak_per_second(native) * 2, 'OP/s')} "
              f"{native.value:8} {si(arch.power.tdp_w, 'W'):>7}  {levels}")
    return 0


def _models(args) -> int:
    from compiler.zoo import MODELS

    for name, fn in MODELS.items():
        doc = (fn.__doc__ or "").strip().splitlines()
        print(f"{name:14} {doc[0] if doc else ''}")
    return 0


def _write(target: str, text: str) -> None:
    if target == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    try:
        Path(target).write_text(text if text.endswith("\n") else text + "\n")
    except OSError as error:
        raise UserError(f"{target}: cannot write ({error.strerror})") from None


if __name__ == "__main__":
    sys.exit(main())

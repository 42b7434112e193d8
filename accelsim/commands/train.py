"""`accelsim train`: one training step of a model on an arch (forward, backward, optimizer per layer; step time,
throughput, MFU, memory against the device) and, given a length, the time to train."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator

from accelsim.args import (many_devices, model_args, model_options, on_many_devices, positive, report_many, rows,
                           write)
from accelsim.commands.command import Command
from accelsim.sim import FIDELITIES


class Choices:
    """An option's choices named by the compiler, read from it on first use (a given value checked, or --help
    listing them), so that declaring the option imports nothing: compiler.train.step imports every op (~0.5 s)."""

    def __init__(self, read: Callable[[], list[str]]):
        self._read = read

    def __contains__(self, value) -> bool:
        return value in self._read()

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


def _optimizers() -> list[str]:
    from compiler.train.step import DEFAULTS

    return sorted(DEFAULTS)


def _losses() -> list[str]:
    from compiler.train.step import LOSSES

    return list(LOSSES)


OPTIMIZERS, LOSSES = Choices(_optimizers), Choices(_losses)


def add_choice(parser, flag: str, choices: Choices, **kwargs) -> None:
    """`parser.add_argument(flag, choices=choices, **kwargs)`, but the choices set after: add_argument lists them
    at once (to check the metavar), which would read them from the compiler."""
    parser.add_argument(flag, **kwargs).choices = choices


def add_train(p: argparse.ArgumentParser) -> None:
    model_args(p, default="alexnet")
    p.add_argument("--arch", default="gtx580", help="preset name (see `accelsim archs`) or a YAML file "
                                                    "(default: gtx580)")
    many_devices(p)
    p.add_argument("--microbatch", type=int, help="micro-batch size: the batch runs as batch / microbatch "
                                                  "forward and backward passes, gradients accumulated (default: batch)")
    add_choice(p, "--optimizer", OPTIMIZERS, default="sgd",
               help="sgd (momentum 0.9, weight decay 5e-4, as AlexNet) or adamw (default: sgd)")
    p.add_argument("--dtype", help="compute dtype: bf16, fp16, fp8, tf32 or fp32 (default: bf16, else fp16, else "
                                   "fp32, whichever the arch has); narrower than fp32 trains an fp32 master copy")
    p.add_argument("--recompute", default="none", choices=["none", "selective", "full"],
                   help="activations recomputed in the backward pass instead of kept: none (the default), selective "
                        "(attention's scores and probabilities) or full (each layer from its input)")
    p.add_argument("--loss", default="cross_entropy", choices=["cross_entropy", "mse", "model"],
                   help="the loss on the model's first output (default: cross_entropy); model: that output is the "
                        "loss itself (an ONNX file ending in SoftmaxCrossEntropyLoss, say)")
    length = p.add_argument_group("training length (for the time to train; give one)")
    length.add_argument("--samples", type=int, help="samples to train on")
    length.add_argument("--epochs", type=float, help="passes over the dataset (with --dataset-size)")
    length.add_argument("--dataset-size", type=int, help="samples in one epoch")
    length.add_argument("--tokens", type=int, help="tokens to train on (language models)")
    p.add_argument("--fidelity", default="tile", choices=FIDELITIES, help="tile (the default) or roofline")
    p.add_argument("--json", metavar="FILE", help="write the result as JSON ('-' for stdout)")
    p.add_argument("--csv", metavar="FILE", help="write one row per layer as CSV ('-' for stdout)")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML report of the step (works offline)")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace of the simulated step (tile "
                                                   "fidelity; open it at ui.perfetto.dev)")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="layers shown in the table, longest first "
                                                                      "(default 20; 0 for all)")


def _train(args: argparse.Namespace) -> int:
    from accelsim.sim.train import train

    for name in ("batch", "microbatch", "seq", "samples", "dataset_size", "tokens", "devices"):
        positive(name.replace("_", "-"), getattr(args, name))
    rows("limit", args.limit)
    if on_many_devices(args, {"arch": "gtx580", "microbatch": None, "fidelity": "tile"}):
        return _train_many(args)
    result = train(args.model, args.arch, batch=args.batch, microbatch=args.microbatch, optimizer=args.optimizer,
                   dtype=args.dtype, loss=args.loss, recompute=args.recompute, samples=args.samples, epochs=args.epochs,
                   dataset_size=args.dataset_size, tokens=args.tokens, fidelity=args.fidelity,
                   trace=bool(args.trace), **model_options(args))
    if args.json:
        write(args.json, result.to_json())
    if args.csv:
        write(args.csv, result.to_csv())
    if args.trace:
        from accelsim.results.trace import write_trace

        write_trace(result.result, args.trace)
    if "-" not in (args.json, args.csv):
        print(result.table(args.limit or None), end="")
    if args.html:
        from accelsim.report.train_page import train_report
        from accelsim.sim.model import load_arch

        path = train_report(result, load_arch(args.arch), args.html)
        print(f"wrote {path}", file=sys.stderr if "-" in (args.json, args.csv) else sys.stdout)
    return 0


def _train_many(args: argparse.Namespace) -> int:
    from accelsim.parallel.train import train_parallel

    result = train_parallel(args.model, args.system, devices=args.devices, slice=args.slice, parallel=args.parallel,
                            batch=args.batch, optimizer=args.optimizer, dtype=args.dtype, loss=args.loss,
                            recompute=args.recompute, samples=args.samples, epochs=args.epochs,
                            dataset_size=args.dataset_size, tokens=args.tokens, **model_options(args))
    report_many(result, args)
    return 0


COMMAND = Command("train", "simulate one training step (forward, backward, optimizer), its memory and the time to "
                  "train", add_train, _train)

"""`accelsim eval`: a model's numerics in the numpy reference: its outputs, at its own precision or the hardware's
(--dtype, --arch: accelsim.sim.emulate), or one training step's loss, gradients and updates (--train)."""
from __future__ import annotations

import argparse

from accelsim.args import model_args, model_options, positive, rows
from accelsim.commands.command import Command
from accelsim.commands.train import LOSSES, OPTIMIZERS, add_choice
from compiler.errors import UserError


def add_eval(ev: argparse.ArgumentParser) -> None:
    model_args(ev, default=None)
    ev.add_argument("--inputs", metavar="IN.npz", help="input arrays keyed by graph input name, and with --train the "
                    "loss's labels under the key 'labels' (default: random, seeded)")
    ev.add_argument("--out", metavar="OUT.npz", help="write output arrays keyed by graph output name (with --train: "
                    "loss, gradient/<param>, updated/<param>, state/<optimizer state>, running/<BatchNorm statistic>)")
    ev.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    ev.add_argument("--train", action="store_true", help="one training step instead: print the loss and each "
                    "parameter's gradient and update norms (docs/training.md)")
    add_choice(ev, "--loss", LOSSES, help="with --train: the loss on the first output (default: cross_entropy); "
               "model: that output is the loss itself")
    add_choice(ev, "--optimizer", OPTIMIZERS, help="with --train: sgd (momentum 0.9, weight decay 5e-4) or adamw "
               "(default: sgd)")
    ev.add_argument("--limit", type=int, metavar="N", help="with --train: parameters listed (default 20; 0 for all)")
    # dest: not `dtype`, which stays a built-in model's own option (--opt dtype=fp16 builds the model in fp16)
    ev.add_argument("--dtype", dest="precision", help="run the model's products at this precision (fp32, bf16, "
                    "fp16, fp8 (E4M3), fp8_e5m2, int8) and print each output's error against the model run in its "
                    "own dtypes (docs/precision.md)")
    ev.add_argument("--arch", help="with or without --dtype: accumulate as this arch's matrix units do (default "
                    "dtype: its native one)")


def _eval(args) -> int:
    import numpy as np

    from accelsim.sim.api import evaluate
    from accelsim.sim.inputs import eval_budget, read_arrays

    positive("batch", args.batch)
    inputs = read_arrays(args.inputs, eval_budget()) if args.inputs else None
    if args.train:
        return _eval_train(args, inputs)
    given = [f"--{flag}" for flag in ("loss", "optimizer", "limit") if getattr(args, flag) is not None]
    if given:
        raise UserError(f"{', '.join(given)} applies to a training step: add --train")
    if args.precision is not None or args.arch is not None:
        return _eval_at(args, inputs)
    feeds, outputs = evaluate(args.model, inputs=inputs, seed=args.seed, batch=args.batch, **model_options(args))
    for name, value in outputs.items():
        print(f"{name}: shape {list(value.shape)} {value.dtype}, mean {float(np.mean(value)):.6g}, "
              f"std {float(np.std(value)):.6g}")
    if args.out:
        _write_arrays(args.out, outputs)
    return 0


def _eval_at(args, inputs: dict | None) -> int:
    """`eval --dtype`: the outputs at the hardware's precision and their error against the reference
    (accelsim.sim.emulate)."""
    from accelsim.sim.emulate import evaluate_at
    from accelsim.sim.precision import error_table

    emulation = evaluate_at(args.model, args.precision, arch=args.arch, inputs=inputs, seed=args.seed,
                            batch=args.batch, **model_options(args))
    print(emulation.summary(), end="")
    print(error_table(emulation.errors), end="")
    if args.out:
        _write_arrays(args.out, emulation.outputs)
    return 0


def _eval_train(args, inputs: dict | None) -> int:
    """`eval --train`: one training step in the numpy reference (accelsim.sim.eval_train)."""
    from accelsim.sim.eval_train import evaluate_step

    given = [flag for flag, dest in (("--dtype", "precision"), ("--arch", "arch")) if getattr(args, dest) is not None]
    if given:
        raise UserError(f"{', '.join(given)} applies to inference: eval --train runs in the model's own dtypes")
    rows("limit", args.limit)
    values = evaluate_step(args.model, inputs=inputs, seed=args.seed, batch=args.batch,
                           optimizer=args.optimizer or "sgd", loss=args.loss or "cross_entropy",
                           **model_options(args))
    print(values.table(20 if args.limit is None else args.limit), end="")
    if args.out:
        _write_arrays(args.out, values.arrays())
    return 0


def _write_arrays(path: str, arrays: dict) -> None:
    """An .npz at exactly `path` (numpy, given a name, would add `.npz` to one without it), written aside and
    renamed (compiler.output)."""
    import numpy as np

    from compiler.output import replacing

    with replacing(path, f"--out {path}") as temporary, open(temporary, "wb") as file:
        np.savez(file, **arrays)
    print(f"wrote {len(arrays)} arrays to {path}")


COMMAND = Command("eval", "run a model's numerics in the numpy reference interpreter", add_eval, _eval)

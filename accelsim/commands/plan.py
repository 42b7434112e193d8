"""`accelsim plan`: search the parallel plans of a model on a system of devices (data, tensor and pipeline degrees,
micro-batches, and for training the schedule, recomputation and ZeRO stage); the best by step time, the Pareto front
of time and memory, and every discarded plan's reason (the API is accelsim/parallel/search.py)."""
from __future__ import annotations

import argparse

from accelsim.args import LateHelp, model_args, model_options, positive, systems, write
from accelsim.commands.command import Command
from accelsim.sim import FIDELITIES
from accelsim.parallel.plan import SEARCH_BUDGET as BUDGET, SEARCH_S as TIME_LIMIT_S
from accelsim.commands.train import OPTIMIZERS, add_choice
from compiler.errors import UserError

RECOMPUTE, ZERO = "none,selective,full", "0,1,2,3"


def add_plan(p: argparse.ArgumentParser) -> None:
    model_args(p, default=None)
    p.add_argument("--system", required=True, action=LateHelp, text=lambda: f"a system of devices (see `accelsim "
                                                                          f"archs`): {systems()}, or a YAML file")
    p.add_argument("--devices", type=int, help="devices of the system to use (default: the system's default)")
    p.add_argument("--train", action="store_true", help="plan a training step (default: one batch of inference, "
                                                        "which searches tp, pp, dp and micro-batches only)")
    add_choice(p, "--optimizer", OPTIMIZERS, default="sgd",
               help="with --train: sgd (momentum 0.9) or adamw (default: sgd)")
    p.add_argument("--dtype", help="compute dtype: bf16, fp16, fp8, tf32 or fp32 (default: the device's, bf16 first)")
    p.add_argument("--recompute", default=RECOMPUTE, metavar="MODES",
                   help="with --train: the recomputation modes searched, comma-separated (default: "
                        "none,selective,full)")
    p.add_argument("--zero", default=ZERO, metavar="STAGES",
                   help="with --train: the ZeRO stages searched, comma-separated (default: 0,1,2,3)")
    p.add_argument("--top", type=int, default=10, metavar="K", help="plans shown, fastest first (default 10); the "
                                                                    "Pareto front of time and memory is shown as well")
    p.add_argument("--workers", type=int, metavar="W", help="processes simulating plans (default: the CPUs, at most "
                                                            "8; small searches run in this process)")
    p.add_argument("--fidelity", default="tile", choices=FIDELITIES,
                   help="tile (the default, as `accelsim train`) or roofline (faster, a lower bound)")
    p.add_argument("--exhaustive", action="store_true",
                   help="simulate every plan that fits (by default a plan whose lower bound puts it behind the best "
                        "--top and off the Pareto front is left unsimulated: the plans shown are the same)")
    p.add_argument("--time-limit", type=float, default=TIME_LIMIT_S, metavar="S",
                   help=f"seconds the search prices candidates before it answers with the best found so far, saying "
                        f"it was cut short and how many it skipped (default {TIME_LIMIT_S:g}; 0: no limit)")
    p.add_argument("--budget", type=int, default=BUDGET, metavar="N",
                   help=f"candidates priced at most (default {BUDGET:,}): a larger space keeps each split of the "
                        f"devices with its fewest micro-batch counts")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr (it is shown on a terminal as a bar, "
                                                        "otherwise as a line every 10%% once a search takes seconds)")
    p.add_argument("--json", metavar="FILE", help="write the search as JSON ('-' for stdout): every plan shown and "
                                                  "every discarded plan with its reason")


def _plan(args: argparse.Namespace) -> int:
    from accelsim.parallel.search import search

    for name in ("batch", "devices", "top", "workers", "seq", "budget"):
        positive(name, getattr(args, name))
    if not args.time_limit >= 0 or args.time_limit == float("inf"):
        raise UserError(f"--time-limit {args.time_limit:g}: must be a number of seconds, at least 0 (0: no limit)")
    given = [flag for flag, value, default in (("--optimizer", args.optimizer, "sgd"),
                                                ("--recompute", args.recompute, RECOMPUTE),
                                                ("--zero", args.zero, ZERO)) if value != default]
    if given and not args.train:
        raise UserError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to a training step: add --train")
    if args.batch is None:
        raise UserError("accelsim plan needs --batch: the global batch the plans split over dp and micro-batches")
    found = search(args.model, args.system, devices=args.devices, batch=args.batch, training=args.train,
                   optimizer=args.optimizer, dtype=args.dtype, top=args.top, workers=args.workers,
                   fidelity=args.fidelity, recompute=_list(args.recompute, str, "--recompute"),
                   zero=_list(args.zero, int, "--zero"), exhaustive=args.exhaustive,
                   time_limit=args.time_limit or None, budget=args.budget,
                   progress=not args.quiet and args.json != "-", **model_options(args))
    if args.json:
        write(args.json, found.to_json())
    if args.json != "-":
        print(found.table(), end="")
    return 0


def _list(text: str, kind, flag: str) -> tuple:
    try:
        return tuple(kind(item) for item in text.replace(" ", "").split(",") if item)
    except ValueError:
        raise UserError(f"{flag} {text!r}: expected a comma-separated list") from None


COMMAND = Command("plan", "search parallel plans (dp, tp, pp, micro-batches, schedule, recomputation, ZeRO) for a "
                  "model on a system of devices and rank them by step time", add_plan, _plan)

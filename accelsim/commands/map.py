"""`accelsim map`: each layer's chosen mapping as a loop nest per memory level, with its estimate, traffic and
how it uses the array (accelsim/sim/build.py maps it, accelsim/explain/array_use.py says why)."""
from __future__ import annotations

import argparse

from accelsim.args import model_args, model_options, positive
from accelsim.commands.command import Command
from compiler.errors import UserError


def add_map(mp: argparse.ArgumentParser) -> None:
    model_args(mp, default=None)
    mp.add_argument("--arch", default="tpu_v1", help="preset name or a YAML file (default: tpu_v1)")
    mp.add_argument("--layer", metavar="NAME", help="only this layer (an IR op or graph node name)")
    mp.add_argument("--dtype", help="the dtype the hardware computes in (default: the arch's native one)")
    mp.add_argument("--budget", type=int, metavar="N",
                    help="mapping candidates costed per op (on a PE array: each tiling once, then N - 1 more)")


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


COMMAND = Command("map", "print each layer's chosen mapping as a loop nest per memory level", add_map, _map)

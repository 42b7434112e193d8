"""`accelsim collective`: a collective timed on a system of devices, one row per size as nccl-tests prints it
(bytes, time, algbw, busbw) plus the algorithm that ran; the API is accelsim.comm."""
from __future__ import annotations

import argparse
import json

from accelsim.args import LateHelp, systems, words, write
from accelsim.commands.command import Command
from accelsim.comm.registry import AUTO, OPS


def add_collective(p: argparse.ArgumentParser) -> None:
    p.add_argument("op", help=words(OPS))
    p.add_argument("--system", required=True, action=LateHelp, text=lambda: f"a system preset ({systems()}; see "
                   "`accelsim archs`) or a YAML file with `kind: system`")
    p.add_argument("--devices", type=int, help="devices taking part (default: the system's default)")
    p.add_argument("--slice", metavar="AxBxC", help="a torus slice, e.g. 4x4x4 (TPU v4); sets the device count")
    p.add_argument("--bytes", default="1GiB", metavar="SIZE", help="the largest size, with a unit (8B, 64KiB, 1GiB; "
                   "nccl-tests' size: a rank's buffer, the whole array for reducescatter and allgather); rows "
                   "double up to it (default 1GiB)")
    p.add_argument("--min-bytes", default="8B", metavar="SIZE", help="the first row's size (default 8B)")
    p.add_argument("--algorithm", action=LateHelp, text=_algorithm_help)
    p.add_argument("--chunk", default="4MiB", metavar="SIZE", help="bytes of one pipelined step of a piece "
                                                                   "(default 4MiB, NCCL's buffer)")
    p.add_argument("--json", metavar="FILE", help="write the rows as JSON ('-' for stdout): op, devices, "
                                                  "algorithm, rows of bytes, seconds, algbw, busbw (bytes/s)")


def _algorithm_help() -> str:
    """--algorithm's help: the registered algorithms, read when --help prints it (registering imports numpy)."""
    from accelsim.comm.algorithms import registered
    from accelsim.comm.registry import per_level_names

    return (f"force one: {words(registered())}; or one per level the slice crosses, innermost first, "
            f"comma-separated, each {words((*per_level_names(), AUTO))} (e.g. ring,tree) (default: {AUTO}, chosen "
            f"per size from latency and bandwidth terms)")


def _collective(args: argparse.Namespace) -> int:
    from accelsim.comm.collective import check_op, network, size_bytes, sweep
    from accelsim.comm.result import table

    op = check_op(args.op)
    net = network(args.system, args.devices, args.slice)
    top, smallest, chunk = (size_bytes(getattr(args, key), f"--{key.replace('_', '-')}")
                            for key in ("bytes", "min_bytes", "chunk"))
    rows = sweep(op, net.system, net.slice.devices, top, args.algorithm, smallest=smallest, slice=args.slice,
                 chunk=chunk)
    if args.json:
        data = {"op": op, "system": net.system.name, "devices": net.slice.devices,
                "algorithm": args.algorithm or "auto", "rows": [r.row() for r in rows]}
        write(args.json, json.dumps(data, indent=1))
    if args.json != "-":
        print(f"# {op} on {net.system.name}: {net.slice.devices} x {net.system.device.name}, "
              f"{_levels(net)}; algorithm {args.algorithm or 'auto'}")
        print(table(rows), end="")
    return 0


def _levels(net) -> str:
    """`8 on nvlink, 2 on infiniband` or `4x4x4 on ici`: the members of each level the slice crosses."""
    parts = []
    for i in net.active:
        shape = net.slice.shape[i]
        members = "x".join(map(str, shape)) if len(shape) > 1 else str(net.participants(i))
        parts.append(f"{members} on {net.system.levels[i].name}")
    return ", ".join(parts)


COMMAND = Command("collective", f"time a collective ({', '.join(OPS)}) on a system of devices, nccl-tests style",
                  add_collective, _collective)

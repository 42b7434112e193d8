"""`accelsim arch`: work with arch files: `convert` writes the arch YAML equivalent to a SCALE-Sim .cfg
(accelsim/importers/scalesim.py), `detect-host` a simd preset for this machine (accelsim/importers/host.py)."""
from __future__ import annotations

import argparse
from pathlib import Path

from accelsim.args import write
from accelsim.commands.command import Command
from compiler.errors import UserError


def add_arch(parser: argparse.ArgumentParser) -> None:
    arch = parser.add_subparsers(dest="arch_command", metavar="ACTION", required=True)
    convert = arch.add_parser("convert", help="write the arch YAML equivalent to a SCALE-Sim .cfg")
    convert.add_argument("cfg", metavar="FILE.cfg", help="a SCALE-Sim config file")
    convert.add_argument("--out", metavar="FILE.yaml", help="where to write it (default: stdout)")
    convert.set_defaults(handler=_arch_convert)
    detect = arch.add_parser("detect-host", help="write a simd preset for this machine (lscpu, /proc, sysfs)")
    detect.add_argument("--out", metavar="FILE.yaml", help="where to write it (default: stdout)")
    detect.set_defaults(handler=_arch_detect_host)


def _arch_convert(args) -> int:
    from accelsim.sim.model import load_arch
    from accelsim.importers.scalesim import convert

    if args.out and not args.out.endswith((".yaml", ".yml")):
        raise UserError(f"--out {args.out}: an arch file must end in .yaml")
    text = convert(args.cfg)
    write(args.out or "-", text)
    if args.out:
        arch = load_arch(args.out)   # what we wrote must load as any preset does
        print(f"wrote {args.out}: {arch.name}, {arch.matrix.array.rows}x{arch.matrix.array.cols} "
              f"{arch.matrix.dataflows[0].value.upper()}")
    return 0


def _arch_detect_host(args) -> int:
    from accelsim.arch import load_arch, load_arch_text
    from accelsim.importers.host import read_host
    from accelsim.importers.host_preset import preset_yaml

    if args.out and not args.out.endswith((".yaml", ".yml")):
        raise UserError(f"--out {args.out}: an arch file must end in .yaml")
    text = preset_yaml(read_host())
    if not args.out:
        load_arch_text(text, "detect-host", Path("detect-host.yaml"))   # checked before it is shown
        write("-", text)
        return 0
    write(args.out, text)
    arch = load_arch(args.out)   # what we wrote must load as any preset does
    print(f"wrote {args.out}: {arch.name}, {arch.matrix.count} cores, {arch.clock_hz / 1e9:.2f} GHz, "
          f"{', '.join(u.name for u in arch.matrix_units)}")
    return 0


COMMAND = Command("arch", "work with arch files", add_arch)

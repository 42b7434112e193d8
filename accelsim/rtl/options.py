"""The waveform options of `accelsim cosim`, each named for the file it writes; the names they had before stay
accepted, with a note on stderr. Light (argparse only): the parser is built before any command runs."""
from __future__ import annotations

import argparse
import sys

# new name -> (old name, what the file is)
WAVEFORMS = {
    "--rtl-vcd": ("--waves", "the RTL's waveform, as its simulator dumps it (Icarus or Verilator): every port and "
                             "internal signal of systolic_core"),
    "--model-vcd": ("--vcd", "the cycle-level model's waveform: the core's ports, same names and widths"),
}


class _Renamed(argparse.Action):
    """Stores the value; given under its old name, says the new one on stderr."""

    def __call__(self, parser, namespace, values, option_string=None):
        if str(values).lower().endswith(".fst"):        # cocotb's default format; these files are VCD
            parser.error(f"{option_string} {values}: the waveform is written as VCD (both on one timescale); "
                         f"name the file .vcd")
        if option_string != self.option_strings[0]:
            print(f"note: {option_string} is deprecated; it is {self.option_strings[0]} now", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_waveform_options(parser: argparse.ArgumentParser) -> None:
    for new, (old, what) in WAVEFORMS.items():
        parser.add_argument(new, old, dest=new[2:].replace("-", "_"), metavar="FILE.vcd", action=_Renamed,
                            help=f"write {what}; both files share one timescale (1 ns, a 10 ns clock) and put "
                                 f"each cycle's edges at the same times ({old}: the old name, deprecated)")

"""`accelsim archs`: one line per hardware preset (kind, peak, dtype, power, memory levels) and per system (devices,
levels of links)."""
from __future__ import annotations

import argparse

from accelsim.commands.command import Command


def _nothing(parser: argparse.ArgumentParser) -> None:
    """archs takes no arguments."""


def _archs(args) -> int:
    from accelsim.arch import load_arch, preset_names
    from accelsim.arch.system_load import load_system, system_names
    from accelsim.results.units import bandwidth, binary, si

    for name in preset_names():
        arch = load_arch(name)
        native = arch.native_dtype
        levels = " > ".join(f"{lv.name} {binary(lv.capacity_total)}" for lv in arch.memory)
        print(f"{name:14} {arch.kind.value:9} {si(arch.matrix.peak_per_second(native) * 2, 'OP/s')} "
              f"{native.value:8} {si(arch.power.tdp_w, 'W'):>7}  {levels}")
    for name in system_names():
        system = load_system(name)
        links = " > ".join(f"{lv.name} {lv.topology.value} {bandwidth(lv.ports * lv.bandwidth_bytes_per_s)}"
                           for lv in system.levels)
        devices = f"{system.devices.default} x {system.device.name}"
        print(f"{name:14} {'system':9} {devices:14} {links} (per device, each way)")
    return 0


COMMAND = Command("archs", "list the hardware presets", _nothing, _archs)

"""Vector units (Map, Reduce, Move): ops / (instances x ops per cycle) in the widened dtype, plus launch.

Invariant: cycles >= ops / peak at the widened dtype's rate, equal when the unit has no launch overhead.
"""
from __future__ import annotations

import numpy as np

from compiler.dtypes import DType
from accelsim.price.clock import to_arch_cycles
from compiler.targeting import widen
from compiler.hardware import Arch, ComputeUnit


def vector_cycles(work: np.ndarray | int, unit: ComputeUnit, dtype: DType | str,
                  arch: Arch | None = None) -> np.ndarray:
    """Cycles of vector rows doing `work` ops each, at the arch clock (the unit's own clock if `arch` is None).

    A dtype the unit lacks runs widened (compiler.targeting.widen, the roofline's rule): int8 adds on a GTX 580
    run as fp32 (the narrowest listed dtype as wide, first in file order), 32 per cycle per SM. Worked example, A100
    ReLU over 1,048,576 bf16 elements:
    108 SMs x 128 bf16 ops per cycle = 13,824 per cycle -> 75.85, so 76 cycles, plus the 3 us launch
    (4,230 cycles at 1.41 GHz) on the first row: the rows passed together are one kernel.
    """
    work = np.atleast_1d(np.asarray(work, np.int64))
    rate = unit.count * unit.peak_per_cycle(widen(unit, DType(dtype)))
    unit_cycles = work / rate
    if arch is None:
        cycles = np.ceil(unit_cycles * (1 - 1e-12)).astype(np.int64)
        launch = round(unit.launch_overhead_s * unit.clock_hz)
    else:
        cycles = to_arch_cycles(unit_cycles, unit, arch)
        launch = arch.cycles(unit.launch_overhead_s)
    if cycles.size and work.any():
        cycles[0] += launch
    return cycles

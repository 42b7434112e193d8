"""Unit clocks to arch clocks, and the one checked cast from priced float cycles to the engine's int64 cycles.

Invariant: every compute model returns whole arch-clock cycles, and a count that int64 cannot hold (inf from
a bandwidth of 1e-300 B/s, 1e38 from a unit clock of 1e-30 Hz, nan) is refused with an ArchError naming the
file and key, never cast: numpy turns such a float into INT64_MIN, which made absurdly slow hardware fast.
"""
from __future__ import annotations

import numpy as np

from accelsim.arch import ArchError
from compiler.hardware import Arch, ComputeUnit

# the most cycles one priced row, or one op's rows together, may take: the engine adds rows' cycles to clocks
# held in int64, which wrap at 2^63, so a sum of rows under 2^62 each cannot wrap
CYCLE_LIMIT = 2.0 ** 62


def whole_cycles(cycles: np.ndarray | float, blame: str) -> np.ndarray:
    """`ceil(cycles)` as int64, or an ArchError saying `blame` (the file and key at fault) where any count is
    not below CYCLE_LIMIT (nan and inf included)."""
    cycles = np.asarray(cycles, np.float64)
    out_of_range = ~(cycles < CYCLE_LIMIT)
    if out_of_range.any():
        worst = cycles[out_of_range].max() if not np.isnan(cycles[out_of_range]).all() else float("nan")
        raise ArchError(f"{blame}: one tile would take {worst:.3g} cycles, more than the 2^62 the engine counts in "
                        f"64-bit integers")
    whole: np.ndarray = np.ceil(cycles).astype(np.int64)
    return whole


def to_arch_cycles(unit_cycles: np.ndarray | float, unit: ComputeUnit, arch: Arch) -> np.ndarray:
    """Cycles of the unit's own clock (the one it sustains under load) as whole arch-clock cycles: H100 CUDA
    cores run at 1,980 MHz on a 1,830 MHz arch clock, so 1,980 of their cycles are 1,830 arch cycles. The 1e-12
    forgives float round-off so that an exact count (65,536.0000000001) does not gain a cycle."""
    scaled = np.asarray(unit_cycles, np.float64) * (arch.clock_hz / unit.working_clock_hz)
    return whole_cycles(scaled * (1 - 1e-12), f"{arch.source_file}: compute unit {unit.name!r} at "
                                              f"{unit.working_clock_hz:.3g} Hz on a {arch.clock_hz:.3g} Hz arch clock")

"""Unit clocks to arch clocks: every compute model returns whole arch-clock cycles."""
from __future__ import annotations

import numpy as np


def to_arch_cycles(unit_cycles: np.ndarray, unit, arch) -> np.ndarray:
    """Cycles of the unit's own clock (the one it sustains under load) as whole arch-clock cycles: H100 CUDA
    cores run at 1,980 MHz on a 1,830 MHz arch clock, so 1,980 of their cycles are 1,830 arch cycles. The 1e-12
    forgives float round-off so that an exact count (65,536.0000000001) does not gain a cycle."""
    scaled = np.asarray(unit_cycles, np.float64) * (arch.clock_hz / unit.working_clock_hz)
    return np.ceil(scaled * (1 - 1e-12)).astype(np.int64)

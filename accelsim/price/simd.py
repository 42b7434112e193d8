"""SIMD (CPU) GEMMs: per-core blocks over the cores, register-blocked micro-kernels on FMA ports or AMX tiles.

Invariant: cycles >= MACs / peak (every core at its rate), with equality when the blocks deal evenly
over all cores and every edge is a whole micro-kernel; cache bandwidth is the engine's, not counted here.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.dtypes import DType
from accelsim.price.clock import to_arch_cycles
from compiler.targeting import instance_tile, k_split, units_used
from compiler.hardware import Arch, ComputeUnit
from compiler.mapping import Mapping


@dataclass(frozen=True)
class Blocking:
    """How one GEMM row lays out on the cores (arrays per compute row where it varies)."""

    instruction: tuple[int, int, int]   # (m, n, k) of one FMA / TMUL instruction
    micro: tuple[int, int]              # (mr, nr): the C block the micro-kernel keeps in registers
    cores: int                          # threads: cores the blocks are dealt over
    blocks: np.ndarray                  # per-core blocks (the mapping's step per core)
    padded: np.ndarray                  # MACs the busiest core runs, edges padded to whole micro-kernels
    cycles: np.ndarray                  # arch cycles, launch included


def matrix_cycles(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit: ComputeUnit, arch: Arch, mapping: Mapping | None,
                  dtype: DType | str) -> np.ndarray:
    """Compute cycles at the arch clock of GEMM rows (m, n, k) on a SIMD matrix unit.

    Worked example, Xeon AVX-512 fp32, 100 x 64 x 256 on one core (a mapping with one "units"): the
    micro-kernel holds 14 x 2 zmm registers of 16 lanes, mr x nr = 14 x 32; 100 rows pad to 8 x 14 = 112,
    so the core runs 112 x 64 x 256 MACs at 32 per cycle = 57,344 cycles where 51,200 would be peak
    (89%: the last micro-tile uses 2 of its 14 rows). AMX bf16 pads K to 32 (one tile row of 64 B).
    """
    return blocking(m, n, k, unit, arch, mapping, dtype).cycles


def blocking(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit: ComputeUnit, arch: Arch, mapping: Mapping | None,
             dtype: DType | str) -> Blocking:
    m, n, k = (np.atleast_1d(np.asarray(x, np.int64)) for x in (m, n, k))
    dtype = DType(dtype)
    mi, ni, ki = instruction_shape(unit, dtype)
    rows, cols = (unit.micro_kernel.rows, unit.micro_kernel.cols) if unit.micro_kernel else (1, 1)
    mr, nr = rows * mi, cols * ni
    # Per-core blocks: the mapping's step per core (compiler.map: the innermost tile split over the
    # "units" factors); without one a block is a micro-tile. Blocks are walked in whole micro-tiles.
    tile = instance_tile(mapping, m, n, k)
    cm, cn = (np.maximum(tile[0], 1), np.maximum(tile[1], 1)) if tile else (np.minimum(mr, m), np.minimum(nr, n))
    cores = units_used(mapping, unit)
    # split-K (the mapping spreads k over cores): each core's share of k is a block of its own
    splits = np.maximum(-(-k // np.maximum(tile[2], 1)), 1) if tile and k_split(mapping) > 1 else 1
    blocks = -(-m // cm) * -(-n // cn) * splits
    busiest = -(-blocks // cores)
    k_share = -(-k // splits)
    k_padded = -(-k_share // ki) * ki
    padded = busiest * (-(-cm // mr) * mr) * (-(-cn // nr) * nr) * k_padded
    cycles = to_arch_cycles(padded / unit.peak_per_cycle(dtype), unit, arch)
    if cycles.size:
        cycles[0] += arch.cycles(unit.launch_overhead_s)    # a thread-pool fork/join per kernel, if given
    return Blocking(instruction=(mi, ni, ki), micro=(mr, nr), cores=cores, blocks=blocks, padded=padded,
                    cycles=cycles)


def instruction_shape(unit: ComputeUnit, dtype: DType) -> tuple[int, int, int]:
    """(m, n, k) of one instruction: C holds `register_rows` rows of `register_bytes` of accumulators
    (fp32/int32, fp64 for fp64). K is what feeds one accumulator: a tile register's row on AMX
    (64 B / 2 B = 32 bf16), one accumulator's width on a vector (fp32 FMA 1, AVX-512 VNNI 4 int8)."""
    kernel = unit.micro_kernel
    if kernel is None:
        return 1, 1, 1
    in_bytes = max(dtype.bits, 8) // 8
    acc_bytes = 8 if dtype is DType.fp64 else 4
    n = max(1, kernel.register_bytes // acc_bytes)
    k = max(1, (kernel.register_bytes if kernel.register_rows > 1 else acc_bytes) // in_bytes)
    return kernel.register_rows, n, k

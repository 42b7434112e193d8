"""Compute models, one per arch kind: the cycles a compute instruction takes, from its tile shape.

Each model is a module with `matrix_cycles(m, n, k, unit, arch, mapping, dtype) -> int64 array`
(vectorized over the compute rows of one op: numpy arrays m, n, k of the tile GEMM shape) for Einsums
on matrix units, and optionally `matrix_split` (the same cycles and the tail of them that overlaps the next
row on the unit); `vector.vector_cycles(work, unit, dtype, arch)` serves Map/Reduce/Move on vector units.
Cycles are arch-clock cycles; the rows passed in one call are one kernel (a launch overhead is paid once,
on the first row). All parameters come from the arch; the models count, they do not search.
"""
from __future__ import annotations

from types import ModuleType

import numpy as np

from accelsim.price import simd, simt, systolic, vector
from accelsim.price.clock import to_arch_cycles
from compiler.dtypes import DType
from compiler.ir import Einsum
from compiler.mapping import Mapping
from compiler.hardware import Arch, ArchKind, ComputeUnit
from compiler.hardware.profiles import Registry, profile
from compiler.targeting import units_used, widen

# A block-scaled GEMM's promotion (compiler.ir.Einsum.scale_block): per output and block of k, the block's partial
# sum times the row's and column's scales added to the accumulator, one fused multiply-add on an fp32 lane (the
# two scales' product is taken once per row and column, DeepGEMM's `scale_a * scale_b` before its FFMA loop).
PROMOTION_OPS = 1

# The compute models by name, as a kind's profile names them (compiler.hardware.profiles: a ternary array is priced as a
# systolic one, with the same timing and other actions and bytes); a name not here is an error naming it.
MODELS: Registry[ModuleType] = Registry("compute model", {model.__name__.rpartition(".")[2]: model
                                                          for model in (simd, simt, systolic)})


def matrix_model(kind: ArchKind) -> ModuleType:
    """The module modelling the matrix units of an arch of `kind`: the compute model its profile names."""
    return MODELS[profile(kind).compute_model]


def matrix_cycles(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit: ComputeUnit, arch: Arch, mapping: Mapping | None,
                  dtype: DType | str) -> np.ndarray:
    model = matrix_model(arch.kind)
    cycles: np.ndarray = model.matrix_cycles(np.asarray(m, np.int64), np.asarray(n, np.int64), np.asarray(k, np.int64),
                                             unit, arch, mapping, dtype)
    return cycles


def matrix_split(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit: ComputeUnit, arch: Arch, mapping: Mapping | None,
                 dtype: DType | str) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, tail): `matrix_cycles` and the part of it the unit overlaps with its next compute row (a
    systolic array's skew and drain, accelsim.price.systolic.steady_and_tail); 0 for models without one."""
    model = matrix_model(arch.kind)
    args = (np.asarray(m, np.int64), np.asarray(n, np.int64), np.asarray(k, np.int64), unit, arch, mapping, dtype)
    if hasattr(model, "matrix_split"):
        split: tuple[np.ndarray, np.ndarray] = model.matrix_split(*args)
        return split
    cycles: np.ndarray = model.matrix_cycles(*args)
    return cycles, np.zeros_like(cycles)


def vector_cycles(work: np.ndarray, unit: ComputeUnit, dtype: DType | str, arch: Arch | None = None) -> np.ndarray:
    return vector.vector_cycles(np.asarray(work, np.int64), unit, dtype, arch)


def with_promotion(cycles: np.ndarray, m: np.ndarray, n: np.ndarray, k: np.ndarray, op: Einsum, unit: ComputeUnit,
                   arch: Arch, mapping: Mapping | None) -> np.ndarray:
    """Compute rows' cycles with a block-scaled Einsum's promotion: each block's partial sums scaled and added on
    the vector unit's fp32 lanes of the instances the step spreads over. On a GPU it follows the block's MMAs: the
    partial sums sit in the registers the next block's MMAs would write, so a warpgroup waits for its MMAs before
    promoting, and DeepGEMM's math warpgroups consume each staged k-tile together (one barrier), so the tensor
    cores idle while they promote. H100, a 128 x 128 step over 128 of k on one SM: 2,097,152 fp8 MACs at 4,096 per
    cycle = 512 cycles, then 16,384 promotions on 128 fp32 lanes = 128 cycles of the 1,980 MHz CUDA cores, 119 of
    the arch clock: 631. Elsewhere (a systolic array's output stage) the promotion runs beside the matrix unit and
    a row takes the longer of the two."""
    block = op.scale_block
    if not block:
        return cycles
    lanes = arch.vector
    instances = min(lanes.count, units_used(mapping, unit))
    work = np.asarray(m, np.float64) * np.asarray(n, np.float64) * np.asarray(k, np.float64) / block * PROMOTION_OPS
    promotion = to_arch_cycles(work / (instances * lanes.peak_per_cycle(widen(lanes, DType.fp32))), lanes, arch)
    promoted: np.ndarray = (cycles + promotion if profile(arch.kind).promotion_after_mma
                             else np.maximum(cycles, promotion))
    return promoted

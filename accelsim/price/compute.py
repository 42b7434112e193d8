"""Compute models, one per arch kind: the cycles a compute instruction takes, from its tile shape.

Each model is a module with `matrix_cycles(m, n, k, unit, arch, mapping, dtype) -> int64 array`
(vectorized over the compute rows of one op: numpy arrays m, n, k of the tile GEMM shape) for Einsums
on matrix units, and optionally `matrix_split` (the same cycles and the tail of them that overlaps the next
row on the unit); `vector.vector_cycles(work, unit, dtype, arch)` serves Map/Reduce/Move on vector units.
Cycles are arch-clock cycles; the rows passed in one call are one kernel (a launch overhead is paid once,
on the first row). All parameters come from the arch; the models count, they do not search.
"""
from __future__ import annotations

import numpy as np

from accelsim.price import simd, simt, systolic, vector

MODELS = {"systolic": systolic, "ternary": systolic, "simt": simt, "simd": simd}


def matrix_model(kind: str):
    """The module modelling matrix units of an arch of `kind` (ternary arrays are systolic arrays of
    add/subtract lanes: the same timing, different actions and bytes)."""
    return MODELS[kind]


def matrix_cycles(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit, arch, mapping, dtype) -> np.ndarray:
    model = matrix_model(arch.kind.value)
    return model.matrix_cycles(np.asarray(m, np.int64), np.asarray(n, np.int64), np.asarray(k, np.int64),
                               unit, arch, mapping, dtype)


def matrix_split(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit, arch, mapping,
                 dtype) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, tail): `matrix_cycles` and the part of it the unit overlaps with its next compute row (a
    systolic array's skew and drain, accelsim.price.systolic.steady_and_tail); 0 for models without one."""
    model = matrix_model(arch.kind.value)
    args = (np.asarray(m, np.int64), np.asarray(n, np.int64), np.asarray(k, np.int64), unit, arch, mapping, dtype)
    if hasattr(model, "matrix_split"):
        return model.matrix_split(*args)
    cycles = model.matrix_cycles(*args)
    return cycles, np.zeros_like(cycles)


def vector_cycles(work: np.ndarray, unit, dtype, arch=None) -> np.ndarray:
    return vector.vector_cycles(np.asarray(work, np.int64), unit, dtype, arch)

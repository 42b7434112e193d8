"""Compute models, one per arch kind: the cycles a compute instruction takes, from its tile shape.

Each model is a module with `matrix_cycles(m, n, k, unit, arch, mapping, dtype, compat) -> int64 array`
(vectorized over the compute rows of one op: numpy arrays m, n, k of the tile GEMM shape) for Einsums
on matrix units, and optionally `matrix_split` (the same cycles and the tail of them that overlaps the next
row on the unit); `vector.vector_cycles(work, unit, dtype, arch)` serves Map/Reduce/Move on vector units.
Cycles are arch-clock cycles; the rows passed in one call are one kernel (a launch overhead is paid once,
on the first row). All parameters come from the arch; the models count, they do not search.
"""
from __future__ import annotations

import importlib
import math

import numpy as np

from compiler.dtypes import DType
from compiler.map.legal import widen  # noqa: F401  (one widening rule, kept in the compiler)

MODELS = {"systolic": "systolic", "ternary": "systolic", "simt": "simt", "simd": "simd"}


def matrix_model(kind: str):
    """The module modelling matrix units of an arch of `kind` (ternary arrays are systolic arrays of
    add/subtract lanes: the same timing, different actions and bytes)."""
    return importlib.import_module(f"accelsim.compute.{MODELS[kind]}")


def matrix_cycles(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit, arch, mapping, dtype, compat=None) -> np.ndarray:
    model = matrix_model(arch.kind.value)
    return model.matrix_cycles(np.asarray(m, np.int64), np.asarray(n, np.int64), np.asarray(k, np.int64),
                               unit, arch, mapping, dtype, compat)


def matrix_split(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit, arch, mapping, dtype,
                 compat=None) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, tail): `matrix_cycles` and the part of it the unit overlaps with its next compute row (a
    systolic array's skew and drain, accelsim.compute.systolic.steady_and_tail); 0 for models without one."""
    model = matrix_model(arch.kind.value)
    args = (np.asarray(m, np.int64), np.asarray(n, np.int64), np.asarray(k, np.int64), unit, arch, mapping, dtype,
            compat)
    if hasattr(model, "matrix_split"):
        return model.matrix_split(*args)
    cycles = model.matrix_cycles(*args)
    return cycles, np.zeros_like(cycles)


def vector_cycles(work: np.ndarray, unit, dtype, arch=None) -> np.ndarray:
    from accelsim.compute.vector import vector_cycles as model

    return model(np.asarray(work, np.int64), unit, dtype, arch)


def to_arch_cycles(unit_cycles: np.ndarray, unit, arch) -> np.ndarray:
    """Cycles of the unit's own clock as whole arch-clock cycles: H100 CUDA cores run at 1,980 MHz on a
    1,830 MHz arch clock, so 1,980 of their cycles are 1,830 arch cycles. The 1e-12 forgives float
    round-off so that an exact count (65,536.0000000001) does not gain a cycle."""
    scaled = np.asarray(unit_cycles, np.float64) * (arch.clock_hz / unit.clock_hz)
    return np.ceil(scaled * (1 - 1e-12)).astype(np.int64)


def gemm_parts(mapping) -> dict[str, str] | None:
    """Each loop dim of a mapped Einsum as compiler.mapping.gemm_view classifies it ("b", "m", "n", "k");
    None for a mapping of another op kind."""
    return dict(mapping.parts) if mapping is not None and mapping.parts else None


def gemm_sizes(mapping, tile=None) -> tuple[int, int, int] | None:
    """(m, n, k) of `tile` (dim -> extent; default the op's loops) in GEMM terms, b folded into m as in
    the Program; None if the mapping is not an Einsum's."""
    parts = gemm_parts(mapping)
    if parts is None:
        return None
    extent = dict(mapping.loops) | (tile or {})
    return tuple(math.prod(extent[d] for d in extent if parts[d] in group) for group in (("b", "m"), ("n",), ("k",)))


def instance_tile(mapping, m, n, k):
    """The tile one instance (SM, core) computes per step, clipped to the row's (m, n, k): the innermost
    level's tile split over the mapping's "units" (compiler.map: a step is one thread block or core
    block per instance, side by side); None without an Einsum mapping with levels."""
    if mapping is None or not mapping.levels:
        return None
    spread: dict[str, int] = {}
    for s in mapping.spatial:
        if s.axis == "units":
            spread[s.dim] = spread.get(s.dim, 1) * s.factor
    share = {d: -(-e // spread.get(d, 1)) for d, e in mapping.levels[-1].tile}
    sizes = gemm_sizes(mapping, share)
    return None if sizes is None else tuple(np.minimum(t, x) for t, x in zip(sizes, (m, n, k)))


def units_used(mapping, unit) -> int:
    """Instances one instruction is dealt over: the mapping's spatial "units" factors, at most `count`;
    all of them where it names none (a GPU's block scheduler fills every SM unless told otherwise)."""
    factors = [s.factor for s in mapping.spatial if s.axis == "units"] if mapping is not None else []
    return max(1, min(unit.count, math.prod(factors))) if factors else unit.count

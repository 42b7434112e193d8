"""Compute models, one per arch kind: the cycles a compute instruction takes, from its tile shape.

Each model is a module with `matrix_cycles(m, n, k, unit, arch, mapping, dtype, compat) -> int64 array`
(vectorized over the compute rows of one op: numpy arrays m, n, k of the tile GEMM shape) for Einsums
on matrix units; `vector.vector_cycles(work, unit, dtype)` serves Map/Reduce/Move on vector units.
All parameters come from the arch; the models count, they do not search.
"""
from __future__ import annotations

import importlib

import numpy as np

MODELS = {"systolic": "systolic", "ternary": "systolic", "simt": "simt", "simd": "simd"}


def matrix_model(kind: str):
    """The module modelling matrix units of an arch of `kind` (ternary arrays are systolic arrays of
    add/subtract lanes: the same timing, different actions and bytes)."""
    return importlib.import_module(f"accelsim.compute.{MODELS[kind]}")


def matrix_cycles(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit, arch, mapping, dtype, compat=None) -> np.ndarray:
    model = matrix_model(arch.kind.value)
    return model.matrix_cycles(np.asarray(m, np.int64), np.asarray(n, np.int64), np.asarray(k, np.int64),
                               unit, arch, mapping, dtype, compat)


def vector_cycles(work: np.ndarray, unit, dtype) -> np.ndarray:
    from accelsim.compute.vector import vector_cycles as model

    return model(np.asarray(work, np.int64), unit, dtype)

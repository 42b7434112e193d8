"""Stimuli that exercise the systolic core: one suite shared by the RTL tests and the cycle-level model's tests.

Every part is a real GEMM through `stimulus.gemm`, so each output row has a numpy answer (`expected_outputs`)."""
from __future__ import annotations

import numpy as np

from accelsim.sim.stimulus import Stimulus, chain, gemm, with_gaps


def operands(rng, m: int, k: int, n: int, ternary: bool, low: int = -128, high: int = 127):
    a = rng.integers(low, high + 1, (m, k)).astype(np.int8)
    b = (rng.integers(-1, 2, (k, n)) if ternary else rng.integers(low, high + 1, (k, n))).astype(np.int8)
    return a, b


def suite(rows: int, cols: int, ternary: bool = False, seed: int = 0, acc_depth: int = 64) -> list[Stimulus]:
    """Parts, each starting on a drained core when chained: ragged random GEMMs (M, K, N not multiples of the
    array, M below and above ROWS), the extremes (-128 everywhere: -128 x -128 sums in every PE; ternary: -1),
    a GEMM with several k folds accumulating, a part with random idle gaps on both queues, and back-to-back
    GEMMs that share nothing but the core."""
    rng = np.random.default_rng(seed)
    parts = []
    for m, k, n in ((1, rows, cols), (rows - 1 or 1, rows + 1, cols + 1), (3 * rows + 2, 2 * rows + 1, 2 * cols - 1),
                    (rows + 3, 3 * rows, cols)):
        parts.append(gemm(*operands(rng, m, k, n, ternary), rows, cols, acc_depth, ternary)[0])
    low = np.full((rows + 2, 3 * rows), -128, np.int8)
    high = np.full((3 * rows, 2 * cols), -1 if ternary else -128, np.int8)
    parts.append(gemm(low, high, rows, cols, acc_depth, ternary)[0])
    gappy = gemm(*operands(rng, 2 * rows + 1, 2 * rows + 3, cols + 2, ternary), rows, cols, acc_depth, ternary)[0]
    parts.append(with_gaps(gappy, rng))
    tight = [gemm(*operands(rng, m, rows, cols, ternary), rows, cols, acc_depth, ternary)[0] for m in (1, rows, 2)]
    parts.append(chain(tight, drain=False))
    return parts


def wraparound(rows: int, cols: int, acc_depth: int = 64) -> Stimulus:
    """Enough k folds of -128 x -128 to carry the 32-bit accumulator past 2^31 and wrap. Each fold adds
    16,384 * ROWS to every output, so about 2^31 / 16,384 = 131,072 cycles whatever the array's size. (A ternary
    array adds at most 128 * ROWS per fold: 2^24 cycles to wrap; its accumulator is the same Verilog.)"""
    folds = (2**31) // (128 * 128 * rows) + 2
    a = np.full((1, folds * rows), -128, np.int8)
    b = np.full((folds * rows, cols), -128, np.int8)
    return gemm(a, b, rows, cols, acc_depth)[0]

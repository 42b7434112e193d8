"""Stall attribution: while an op's compute unit is idle, which memory level is it waiting for?

Invariant: per op, span = compute-busy + the stalls of every level + `other` (idle time no transfer
explains), so the split adds up. A gap before a compute is blamed on the dependency that ended last, followed
back through transfers that themselves started the moment their own last dependency ended: a weight tile late
from DRAM is DRAM's stall, not the on-chip FIFO's that merely relayed it.
"""
import numpy as np
from numba import njit

from accelsim.engine.arrays import Ints

COMPUTE = 1


@njit(cache=True)
def _critical(i: int, dep: Ints, end: Ints, done: Ints | None) -> tuple[int, int]:
    """(row, when it let row i go) of row i's dependency that let it go last; (-1, -1) if none."""
    best, when = -1, -1
    for j in range(dep.shape[1]):
        d = dep[i, j]
        if d < 0:
            continue
        t = end[d] if done is None else done[i, j]
        if best < 0 or t > when:
            best, when = d, t
    return best, when


@njit(cache=True)
def _blame(x: int, kind: Ints, level: Ints, start: Ints, end: Ints, dep: Ints, done: Ints | None) -> int:
    """Level of the transfer at the root of row x's wait; -1 if x is not a transfer."""
    while kind[x] != COMPUTE:
        y, when = _critical(x, dep, end, done)
        if y < 0 or kind[y] == COMPUTE or when != start[x]:
            break
        x = y
    return level[x] if kind[x] != COMPUTE else -1


@njit(cache=True)
def attribute(kind: Ints, level: Ints, start: Ints, end: Ints, dep: Ints, op_rows: Ints, n_levels: int,
              done: Ints | None = None) -> tuple[Ints, Ints, Ints, Ints]:
    """kind, level, start, end: int64[rows]; dep: int64[rows, deps]; op_rows: int64[ops + 1] row offsets; done:
    int64[rows, deps] or None, when each dependency let its row go (None: at its end; a load read on as its
    parts land lets go before it ends). Returns (span, busy, other: int64[ops], stall: int64[ops, n_levels])."""
    n_ops = op_rows.shape[0] - 1
    span = np.zeros(n_ops, np.int64)
    busy = np.zeros(n_ops, np.int64)
    other = np.zeros(n_ops, np.int64)
    stall = np.zeros((n_ops, n_levels), np.int64)
    for o in range(n_ops):
        lo, hi = op_rows[o], op_rows[o + 1]
        if hi == lo:
            continue
        t0 = start[lo]
        last = lo
        for i in range(lo, hi):
            t0 = min(t0, start[i])
            if end[i] > end[last]:
                last = i
        span[o] = end[last] - t0
        prev = t0
        for i in range(lo, hi):
            if kind[i] != COMPUTE:
                continue
            if start[i] > prev:
                d, _ = _critical(i, dep, end, done)
                lv = _blame(d, kind, level, start, end, dep, done) if d >= 0 else -1
                if lv >= 0:
                    stall[o, lv] += start[i] - prev
                else:
                    other[o] += start[i] - prev
            # busy is the union of the computes' spans: a systolic row's tail overlaps the next row
            if end[i] > max(start[i], prev):
                busy[o] += end[i] - max(start[i], prev)
            if end[i] > prev:
                prev = end[i]
        if end[last] > prev:
            lv = _blame(last, kind, level, start, end, dep, done)
            if lv >= 0:
                stall[o, lv] += end[last] - prev
            else:
                other[o] += end[last] - prev
    return span, busy, other, stall

"""Issue the Program in order on its resources: each row starts when its dependencies have ended and its
resource (a memory level's DMA channel or a compute unit) is free, and holds that resource `occupancy` cycles.

Invariant: a resource serves one row at a time, in program order (contention); a row's `latency` is
pipelined (it delays the row's end, not the resource: a transfer's flight time, a systolic compute's skew and
drain, which the next compute on the array overlaps); ops run one after another (a row of op i+1 starts no
earlier than the last end of op i, as layers do when each consumes the previous one's output), unless op i+1
runs beside op i (a fused epilogue in a systolic array's output stage): then it starts with op i, held back
only by its dependencies, and the rows of both may be issued interleaved.
"""
import numpy as np
from numba import njit

from accelsim.engine.arrays import Bools, Floats, Ints


@njit(cache=True)
def schedule(resource: Ints, occupancy: Ints, latency: Ints, dep: Ints, op: Ints, n_resources: int,
             on_release: Bools | None = None, share: Floats | None = None, beside: Bools | None = None,
             lead: Ints | None = None) -> tuple[Ints, Ints]:
    """resource, occupancy, latency, op: int64[rows]; dep: int64[rows, deps] (-1 = none); on_release:
    bool[rows, deps] or None, True where row i waits only for dep d to leave its resource (start + occupancy),
    not for its end: a load into a buffer slot waits for the compute that read the slot's last tile, and a
    compute has read its operands when it leaves the unit (its latency is results in flight). share:
    float64[rows, deps] or None, > 0 where row i reads only that share of compute dep d's output, ready once
    the share has streamed (start + share * occupancy + latency: the skew and drain of the first results).
    beside: bool[ops] or None, True where op o runs beside op o - 1 (its floor is op o - 1's). lead:
    int64[rows, deps] or None, cycles row i may start before dep d is done (a load filling a buffer tile by
    tile: its later tiles land that much after it starts, into places freed later).
    Returns (start, end): int64[rows]."""
    n = resource.shape[0]
    start = np.zeros(n, np.int64)
    end = np.zeros(n, np.int64)
    free = np.zeros(n_resources, np.int64)
    n_ops = op.max() + 1 if n else 0
    floor = np.zeros(n_ops, np.int64)
    seen = np.zeros(n_ops, np.bool_)
    horizon = 0
    for i in range(n):
        o = op[i]
        if not seen[o]:
            # an op beside the one before it shares that one's floor; if its first row issues before any of that
            # one's (an epilogue's operands loaded ahead of its kernel), both start from the horizon now
            k = o
            while beside is not None and k > 0 and beside[k] and not seen[k - 1]:
                k -= 1
            base = floor[k - 1] if beside is not None and k > 0 and beside[k] else horizon
            for q in range(k, o + 1):
                if not seen[q]:
                    seen[q] = True
                    floor[q] = base
        ready = floor[o]
        for j in range(dep.shape[1]):
            d = dep[i, j]
            if d < 0:
                continue
            done = end[d]
            if on_release is not None and on_release[i, j]:
                done = start[d] + occupancy[d]
            if share is not None and share[i, j] > 0:
                done = start[d] + np.int64(np.ceil(share[i, j] * occupancy[d])) + latency[d]
            if lead is not None:
                done -= lead[i, j]
            if done > ready:
                ready = done
        r = resource[i]
        s = ready if ready > free[r] else free[r]
        free[r] = s + occupancy[i]
        start[i] = s
        end[i] = s + occupancy[i] + latency[i]
        if end[i] > horizon:
            horizon = end[i]
    return start, end

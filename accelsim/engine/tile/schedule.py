"""Issue the Program in order on its resources: each row starts when its dependencies have ended and its
resource (a memory level's DMA channel or a compute unit) is free, and holds that resource `occupancy` cycles.

Invariant: a resource serves one row at a time, in program order (contention); a row's `latency` is
pipelined (it delays the row's end, not the resource: a transfer's flight time, a systolic compute's skew and
drain, which the next compute on the array overlaps); ops run one after another (a row of op i+1 starts no
earlier than the last end of op i, as layers do when each consumes the previous one's output).
"""
import numpy as np
from numba import njit


@njit(cache=True)
def schedule(resource, occupancy, latency, dep, op, n_resources, on_release=None):
    """resource, occupancy, latency, op: int64[rows]; dep: int64[rows, deps] (-1 = none); on_release:
    bool[rows, deps] or None, True where row i waits only for dep d to leave its resource (start + occupancy),
    not for its end: a load into a buffer slot waits for the compute that read the slot's last tile, and a
    compute has read its operands when it leaves the unit (its latency is results in flight).
    Returns (start, end): int64[rows]."""
    n = resource.shape[0]
    start = np.zeros(n, np.int64)
    end = np.zeros(n, np.int64)
    free = np.zeros(n_resources, np.int64)
    floor = 0
    horizon = 0
    current = -1
    for i in range(n):
        if op[i] != current:
            current = op[i]
            floor = horizon
        ready = floor
        for j in range(dep.shape[1]):
            d = dep[i, j]
            if d < 0:
                continue
            done = end[d]
            if on_release is not None and on_release[i, j]:
                done = start[d] + occupancy[d]
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

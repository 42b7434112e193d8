"""Issue the Program in order on its resources: each row starts when its dependencies have ended and its
resource (a memory level's DMA channel or a compute unit) is free, and holds that resource `occupancy` cycles.

Invariant: a resource serves one row at a time, in program order (contention); a transfer's `latency` is
pipelined (it delays the row's end, not the channel); ops run one after another (a row of op i+1 starts no
earlier than the last end of op i, as layers do when each consumes the previous one's output).
"""
import numpy as np
from numba import njit


@njit(cache=True)
def schedule(resource, occupancy, latency, dep, op, n_resources):
    """resource, occupancy, latency, op: int64[rows]; dep: int64[rows, deps] (-1 = none).
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
            if d >= 0 and end[d] > ready:
                ready = end[d]
        r = resource[i]
        s = ready if ready > free[r] else free[r]
        free[r] = s + occupancy[i]
        start[i] = s
        end[i] = s + occupancy[i] + latency[i]
        if end[i] > horizon:
            horizon = end[i]
    return start, end

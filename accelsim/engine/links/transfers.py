"""Transfers on link channels, simulated event by event: when each starts and when its data lands.

A transfer moves `nbytes` across the channels of its path (-1 pads), in order and cut-through, holding them
at once. On path channel k it stands for `share[t, k]` identical flows (the devices it represents by symmetry
that send through the same physical link), so it keeps that channel busy share x nbytes / bandwidth seconds,
and it crosses `hops[t, k]` hops of that channel's latency. Its data lands at

    start + hold + (stages - 1) x min(hold, hold x grain / nbytes) + sum_k hops[t, k] x latency[path[t, k]]

where hold is the longest of its channel times and `stages` counts store-and-forward stages it is pipelined
through in `grain`-byte pieces (a chain broadcast: n - 1 stages, the fill paid once, not per stage).

Contention: a transfer waits for its dependencies, then queues at the first channel of its path. A channel
serves one transfer at a time and never idles while one waits: when free it takes, of those waiting, the lowest
`priority` (the piece number: older pieces first, as a library's in-order loop over chunks drains its
pipeline), then the earliest ready, then the lowest index. The other channels of its path must be free too (it
starts when the last one is). Latency is in flight, not on the channel: the next transfer may start as soon as
the bytes have left. Two collectives sharing a channel interleave piece by piece, each at about half the rate.
Invariant: a transfer starts no earlier than its release time and the end of every dependency, and a channel
is never busy with two transfers at once.
"""
import numpy as np
from numba import njit

from accelsim.engine.arrays import Floats, Ints


@njit(cache=True)
def _before(key: Floats, idx: Ints, i: int, j: int) -> bool:
    return key[i] < key[j] or (key[i] == key[j] and idx[i] < idx[j])


@njit(cache=True)
def _push(key: Floats, idx: Ints, size: int, k: float, t: int) -> int:
    """Add event t at time k to the heap of `size` entries; returns the new size."""
    i = size
    key[i] = k
    idx[i] = t
    while i > 0:
        parent = (i - 1) // 2
        if not _before(key, idx, i, parent):
            break
        key[i], key[parent] = key[parent], key[i]
        idx[i], idx[parent] = idx[parent], idx[i]
        i = parent
    return size + 1


@njit(cache=True)
def _pop(key: Floats, idx: Ints, size: int) -> int:
    """Remove the root (the earliest event); the caller has read it. Returns the new size."""
    size -= 1
    key[0] = key[size]
    idx[0] = idx[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        child = left
        if left + 1 < size and _before(key, idx, left + 1, left):
            child = left + 1
        if not _before(key, idx, child, i):
            break
        key[i], key[child] = key[child], key[i]
        idx[i], idx[child] = idx[child], idx[i]
        i = child
    return size


@njit(cache=True)
def _hold(t: int, bandwidth: Floats, path: Ints, share: Floats, nbytes: Floats) -> float:
    """Seconds transfer t keeps its busiest channel: the rate its bottleneck allows."""
    hold = 0.0
    for k in range(path.shape[1]):
        c = path[t, k]
        if c >= 0:
            busy = share[t, k] * nbytes[t] / bandwidth[c]
            if busy > hold:
                hold = busy
    return hold


@njit(cache=True)
def _flight(t: int, latency: Floats, path: Ints, hops: Ints) -> float:
    seconds = 0.0
    for k in range(path.shape[1]):
        c = path[t, k]
        if c >= 0:
            seconds += hops[t, k] * latency[c]
    return seconds


@njit(cache=True)
def _queue_before(prio: Ints, ready: Floats, idx: Ints, c: int, i: int, j: int) -> bool:
    if prio[c, i] != prio[c, j]:
        return prio[c, i] < prio[c, j]
    if ready[c, i] != ready[c, j]:
        return ready[c, i] < ready[c, j]
    return idx[c, i] < idx[c, j]


@njit(cache=True)
def _enqueue(prio: Ints, ready: Floats, idx: Ints, size: Ints, c: int, p: int, r: float, t: int) -> None:
    """Add transfer t (priority p, ready at r) to channel c's waiting heap."""
    i = size[c]
    prio[c, i], ready[c, i], idx[c, i] = p, r, t
    size[c] += 1
    while i > 0:
        parent = (i - 1) // 2
        if not _queue_before(prio, ready, idx, c, i, parent):
            break
        prio[c, i], prio[c, parent] = prio[c, parent], prio[c, i]
        ready[c, i], ready[c, parent] = ready[c, parent], ready[c, i]
        idx[c, i], idx[c, parent] = idx[c, parent], idx[c, i]
        i = parent


@njit(cache=True)
def _dequeue(prio: Ints, ready: Floats, idx: Ints, size: Ints, c: int) -> int:
    """Remove and return the transfer channel c serves next."""
    t = idx[c, 0]
    size[c] -= 1
    last = size[c]
    prio[c, 0], ready[c, 0], idx[c, 0] = prio[c, last], ready[c, last], idx[c, last]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= last:
            break
        child = left
        if left + 1 < last and _queue_before(prio, ready, idx, c, left + 1, left):
            child = left + 1
        if not _queue_before(prio, ready, idx, c, child, i):
            break
        prio[c, i], prio[c, child] = prio[c, child], prio[c, i]
        ready[c, i], ready[c, child] = ready[c, child], ready[c, i]
        idx[c, i], idx[c, child] = idx[c, child], idx[c, i]
        i = child
    return t


@njit(cache=True)
def _dependants(dep: Ints) -> tuple[Ints, Ints, Ints]:
    """(waiting[t]: dependencies t waits for; children, child: CSR lists of the transfers waiting for each)."""
    n = dep.shape[0]
    waiting = np.zeros(n, np.int64)
    children = np.zeros(n + 1, np.int64)
    for t in range(n):
        for j in range(dep.shape[1]):
            if dep[t, j] >= 0:
                waiting[t] += 1
                children[dep[t, j] + 1] += 1
    for t in range(n):
        children[t + 1] += children[t]
    child = np.empty(children[n], np.int64)
    filled = children[:n].copy()
    for t in range(n):
        for j in range(dep.shape[1]):
            d = dep[t, j]
            if d >= 0:
                child[filled[d]] = t
                filled[d] += 1
    return waiting, children, child


@njit(cache=True)
def _release(t: int, done: float, children: Ints, child: Ints, ready: Floats, waiting: Ints, ev_key: Floats,
             ev_code: Ints, events: int) -> int:
    """Transfer t lands at `done`: its dependants wait for one fewer; those now free are due at their ready time."""
    for i in range(children[t], children[t + 1]):
        x = child[i]
        if done > ready[x]:
            ready[x] = done
        waiting[x] -= 1
        if waiting[x] == 0:
            events = _push(ev_key, ev_code, events, ready[x], x)
    return events


@njit(cache=True)
def time_transfers(bandwidth: Floats, latency: Floats, path: Ints, share: Floats, hops: Ints, stages: Ints,
                   nbytes: Floats, dep: Ints, release: Floats, priority: Ints, grain: float) -> tuple[Floats, Floats]:
    """bandwidth, latency: float64[channels] (bytes/s, seconds per hop); path, hops: int64[T, P]; share:
    float64[T, P]; stages, priority: int64[T]; nbytes, release: float64[T]; dep: int64[T, D] (-1 = none);
    grain: bytes. Returns (start, end): float64[T]; -1 for a transfer that never became ready (a cycle)."""
    n = nbytes.shape[0]
    channels = bandwidth.shape[0]
    start = np.full(n, -1.0)
    end = np.full(n, -1.0)
    ready = release.copy()
    waiting, children, child = _dependants(dep)
    # events: code t < n = transfer t is ready; code n + c = channel c may have come free
    capacity = n * (path.shape[1] + 1) + channels + 1
    ev_key = np.empty(capacity, np.float64)
    ev_code = np.empty(capacity, np.int64)
    events = 0
    for t in range(n):
        if waiting[t] == 0:
            events = _push(ev_key, ev_code, events, ready[t], t)
    q_prio = np.empty((channels, max(n, 1)), np.int64)
    q_ready = np.empty((channels, max(n, 1)), np.float64)
    q_idx = np.empty((channels, max(n, 1)), np.int64)
    q_size = np.zeros(channels, np.int64)
    free = np.zeros(channels)
    touched = np.zeros(channels, np.bool_)
    while events > 0:
        now = ev_key[0]
        while events > 0 and ev_key[0] == now:     # every arrival at `now` queues before any channel chooses
            code = ev_code[0]
            events = _pop(ev_key, ev_code, events)
            if code >= n:
                touched[code - n] = True
            elif path[code, 0] >= 0:
                _enqueue(q_prio, q_ready, q_idx, q_size, path[code, 0], priority[code], ready[code], code)
                touched[path[code, 0]] = True
            else:                                    # no channel: it lands when it is ready
                start[code] = now
                end[code] = now
                events = _release(code, now, children, child, ready, waiting, ev_key, ev_code, events)
        for c in range(channels):
            if not touched[c]:
                continue
            touched[c] = False
            while q_size[c] > 0 and free[c] <= now:
                t = _dequeue(q_prio, q_ready, q_idx, q_size, c)
                s = now
                for k in range(path.shape[1]):
                    if path[t, k] >= 0 and free[path[t, k]] > s:
                        s = free[path[t, k]]
                hold = _hold(t, bandwidth, path, share, nbytes)
                for k in range(path.shape[1]):
                    ck = path[t, k]
                    if ck >= 0:
                        free[ck] = s + share[t, k] * nbytes[t] / bandwidth[ck]
                        events = _push(ev_key, ev_code, events, free[ck], n + ck)
                fill = 0.0
                if stages[t] > 1 and nbytes[t] > 0.0:
                    fill = (stages[t] - 1) * hold * min(1.0, grain / nbytes[t])
                start[t] = s
                end[t] = s + hold + fill + _flight(t, latency, path, hops)
                events = _release(t, end[t], children, child, ready, waiting, ev_key, ev_code, events)
    return start, end


@njit(cache=True)
def bounds(bandwidth: Floats, latency: Floats, path: Ints, share: Floats, hops: Ints, nbytes: Floats,
           dep: Ints) -> tuple[float, Floats]:
    """The two terms of an alpha-beta estimate, each a lower bound on time_transfers' makespan: the longest
    dependency chain of hop latencies (seconds), and each channel's busy time (float64[channels], seconds).
    Dependencies must point to earlier transfers (the order every expansion writes)."""
    n = nbytes.shape[0]
    chain = np.zeros(n)
    load = np.zeros(bandwidth.shape[0])
    longest = 0.0
    for t in range(n):
        before = 0.0
        for j in range(dep.shape[1]):
            d = dep[t, j]
            if d >= 0 and chain[d] > before:
                before = chain[d]
        chain[t] = before + _flight(t, latency, path, hops)
        if chain[t] > longest:
            longest = chain[t]
        for k in range(path.shape[1]):
            c = path[t, k]
            if c >= 0:
                load[c] += share[t, k] * nbytes[t] / bandwidth[c]
    return longest, load

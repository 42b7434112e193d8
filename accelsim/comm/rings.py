"""Ring-family expansions: a collective as the ring steps real libraries run, on one representative device.

The buffer is cut into pieces (NCCL's chunks) that run the whole algorithm one behind another, so step s of
piece j overlaps step s - 1 of piece j + 1 and the latency of a step hides behind other pieces' bytes.
A ring step of a piece waits for the previous step of the same piece: by symmetry the predecessor's send
(whose data this step forwards) ends when the representative's own previous send ends.
  ring          flat ring over every device; across nodes, one ring per local rank (NCCL's rails), ring r
                leaving the node at local rank r: the representative's lane 0 crosses the network
  ring (a level) one level's reduce-scatter or all-gather in a per-level list (accelsim.comm.levels): a ring
                through its switch, or dimension by dimension on a torus
  torus         TPU-style dimension-ordered rings: the buffer split into one part per dimension, part q
                reducing along x, y, z rotated by q, so all six links of a chip are busy at once
A ring of more than MAX_STEPS steps (2(n-1) for an allreduce of n devices) is written as MAX_STEPS rows per piece
and lane, each standing for a run of consecutive steps (their bytes and hops summed), so a million devices cost
what 513 do: every channel's bytes and every chain's hops are kept, only the pipelining of pieces is coarser
(a 1 GiB allreduce over 1024 GPUs, 2046 steps in 1024 rows: 0.24% slower than one row per step).
Invariant: for op in (allreduce, reducescatter, allgather) every device's egress carries at least the bytes
of nccl-tests' bus bandwidth model, (n-1)/n x S per reduce-scatter or all-gather pass.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accelsim.comm.network import Dim, Network, Transfers
from accelsim.comm.registry import per_level, slice_wide

MAX_PIECES = 64     # pieces per collective: past it pieces grow, so a 64 GiB allreduce stays a few thousand rows
MAX_STEPS = 1024    # ring steps written one row each: past it a row stands for a run of steps


@dataclass(frozen=True)
class Lane:
    """One ring a device takes part in: the channel it sends on, its flows, hops per step, share of the data."""

    channel: int
    share: float
    hops: int
    fraction: float


@dataclass
class Job:
    """One collective being expanded: `size` in nccl-tests' sense (the larger of a rank's input and output)."""

    net: Network
    tb: Transfers
    op: str
    size: float
    chunk: float

    def pieces(self, largest_step: float) -> int:
        """Pieces the buffer is cut into so one step of one piece moves about `chunk` bytes."""
        return int(min(MAX_PIECES, max(1, math.ceil(largest_step / self.chunk))))

    @property
    def passes(self) -> tuple[str, ...]:
        """The reduce-scatter ("rs") and all-gather ("ag") passes the op is made of."""
        return {"allreduce": ("rs", "ag"), "reducescatter": ("rs",), "allgather": ("ag",)}[self.op]


def ring_steps(tb: Transfers, lanes: list[Lane], successor: list[int], steps: int, step_bytes: float,
               after: np.ndarray | None, pieces: int) -> np.ndarray | None:
    """`steps` ring steps of every piece on `lanes`; step s of lane l waits for step s - 1 of lane successor[l]
    (the same piece), step 0 for after[piece]. Returns the ids of the last step, [pieces, lanes]."""
    if steps == 0:
        return after
    width = len(lanes)
    run = np.diff(np.linspace(0, steps, min(steps, MAX_STEPS) + 1).round().astype(np.int64))   # steps per row
    steps = run.size
    s, j, l = (a.ravel() for a in np.meshgrid(np.arange(steps), np.arange(pieces), np.arange(width),
                                              indexing="ij"))
    base = tb.count
    first = 1 if after is None else after.shape[1]
    dep = np.full((s.size, first), -1, np.int64)
    later = s > 0
    dep[later, 0] = base + ((s[later] - 1) * pieces + j[later]) * width + np.asarray(successor)[l[later]]
    if after is not None:
        dep[~later] = after[j[~later]]
    channel, share, hops, fraction = (np.array([getattr(lane, f) for lane in lanes])[l]
                                      for f in ("channel", "share", "hops", "fraction"))
    ids = tb.add(channel[:, None], step_bytes * fraction * run[s], dep, share[:, None], (hops * run[s])[:, None],
                 piece=j)
    return ids.reshape(steps, pieces, width)[-1]


def level_lanes(net: Network, level: int) -> tuple[list[Lane], list[int]]:
    """A ring over one level's members: through the switch on the device's egress, along the one dimension a
    ring or torus slice spans (dim_lanes), or around a torus both ways (a Hamiltonian cycle of neighbour hops,
    one ring each direction; members `step` links apart make each hop that many links, shared as many ways)."""
    if level in net.egress:
        c = net.egress[level]
        return [Lane(c, net.flows(c), 1, 1.0)], [0]
    dims = net.dims[level]
    if len(dims) == 1:
        return dim_lanes(dims[0])
    step = max(d.step for d in dims)
    return [Lane(dims[0].plus, step, step, 0.5), Lane(dims[0].minus, step, step, 0.5)], [0, 1]


def dim_lanes(d: Dim) -> tuple[list[Lane], list[int]]:
    """A ring along one torus dimension: both directions when it wraps; else one ring zig-zagging along the
    line (0 -> 2 -> 4 ... -> 3 -> 1 -> 0: two hops per step, each directed link carrying one flow). Members
    `d.step` links apart: each hop is that many links, and the groups interleaved between them share each link."""
    if d.wraps:
        return [Lane(d.plus, d.step, d.step, 0.5), Lane(d.minus, d.step, d.step, 0.5)], [0, 1]
    return [Lane(d.plus, d.step, (1 if d.size == 2 else 2) * d.step, 1.0)], [0]


def rail_lanes(net: Network) -> tuple[list[Lane], list[int]]:
    """One ring per local rank of the innermost level, ring r leaving the node at local rank r: the
    representative sends ring 0 over the next level out and the others inside. (With three or more levels
    every node exit is charged to the second: an approximation.)"""
    inner, outer = net.active[0], net.active[1]
    members = net.participants(inner)
    inside, exit_ = net.egress[inner], net.first(outer)
    lanes = [Lane(exit_, net.flows(exit_), 1, 1 / members)] + \
        [Lane(inside, net.flows(inside), 1, 1 / members)] * (members - 1)
    return lanes, [(l + 1) % members for l in range(members)]


def flat_ring_unavailable(net: Network) -> str | None:
    if len(net.active) > 1 and net.active[0] not in net.egress:
        return "a flat ring across levels needs a switched innermost level"
    return None


@slice_wide("ring", rank=10, ops=("allreduce", "reducescatter", "allgather", "broadcast"),
            unavailable=flat_ring_unavailable)
def ring(job: Job) -> None:
    """nccl's ring: 2(n-1) steps of S/n for allreduce, n-1 for reduce-scatter and all-gather; a pipelined chain
    for broadcast."""
    net, n = job.net, job.net.slice.devices
    if job.op == "broadcast":
        return _chain(job)
    lanes, successor = level_lanes(net, net.active[0]) if len(net.active) == 1 else rail_lanes(net)
    pieces = job.pieces(job.size / n)
    ring_steps(job.tb, lanes, successor, (n - 1) * len(job.passes), job.size / pieces / n, None, pieces)


def _chain(job: Job) -> None:
    """Broadcast down a ring from the root, pipelined: every device forwards each piece once; the last piece lands
    n - 1 stages after it left."""
    net, n = job.net, job.net.slice.devices
    pieces = job.pieces(job.size)
    if len(net.active) == 1:
        c = net.first(net.active[0])
        step = max((d.step for d in net.dims.get(net.active[0], ())), default=1)    # torus members that far apart
        job.tb.add((c,), np.full(pieces, job.size / pieces), share=net.flows(c) * step, hops=(n - 1) * step,
                   stages=n - 1)
        return
    inner, outer = net.active[0], net.active[1]
    members = net.participants(inner)
    inside, exit_ = net.egress[inner], net.first(outer)
    nodes = n // members
    job.tb.add((inside, exit_), np.full(pieces, job.size / pieces),
               share=((members - 1) / members * net.flows(inside), net.flows(exit_) / members),
               hops=(n - nodes, nodes - 1), stages=n - 1)


@per_level("ring", rank=10, ops=("allreduce", "reducescatter", "allgather"))
def ring_pass(job: Job, level: int, kind: str, full: float, after, pieces: int):
    """One reduce-scatter or all-gather over a level's members: a ring through a switch, dimension by dimension
    on a torus."""
    net = job.net
    if level in net.egress:
        lanes, successor = level_lanes(net, level)
        members = net.participants(level)
        return ring_steps(job.tb, lanes, successor, members - 1, full / members, after, pieces)
    dims = net.dims[level] if kind == "rs" else list(reversed(net.dims[level]))
    sizes = _dim_buffers(full, net.dims[level])
    for d in dims:
        lanes, successor = dim_lanes(d)
        after = ring_steps(job.tb, lanes, successor, d.size - 1, sizes[d.plus] / d.size, after, pieces)
    return after


def _dim_buffers(full: float, dims: list[Dim]) -> dict[int, float]:
    """Buffer a reduce-scatter along each dimension starts from (keyed by its + channel), taken in order."""
    sizes = {}
    for d in dims:
        sizes[d.plus] = full
        full /= d.size
    return sizes


def _one_torus_level(net: Network) -> str | None:
    return None if len(net.active) == 1 and net.active[0] in net.dims else "needs a slice of one ring or torus level"


@slice_wide("torus", rank=50, ops=("allreduce", "reducescatter", "allgather", "broadcast"),
            unavailable=_one_torus_level)
def torus(job: Job) -> None:
    """Dimension-ordered rings (TPU): reduce-scatter along x, y, z, all-gather back along z, y, x, with the
    buffer split into one part per dimension, each starting on another, so every link is busy from the start.
    Broadcast: a pipelined chain along x, then y, then z."""
    net = job.net
    level = net.active[0]
    dims = net.dims[level]
    if job.op == "broadcast":
        pieces = job.pieces(job.size)
        job.tb.add(tuple(d.plus for d in dims), np.full(pieces, job.size / pieces), share=[d.step for d in dims],
                   hops=[(d.size - 1) * d.step for d in dims], stages=sum(d.size - 1 for d in dims))
        return
    parts = len(dims)
    pieces = job.pieces(job.size / parts / dims[0].size)
    for q in range(parts):
        order = dims[q:] + dims[:q]
        sizes = _dim_buffers(job.size / pieces / parts, order)
        after = None
        sequence = [("rs", d) for d in order] + [("ag", d) for d in reversed(order)]
        for kind, d in sequence:
            if kind in job.passes:
                lanes, successor = dim_lanes(d)
                after = ring_steps(job.tb, lanes, successor, d.size - 1, sizes[d.plus] / d.size, after, pieces)

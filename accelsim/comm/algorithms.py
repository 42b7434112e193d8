"""Every registered collective algorithm (importing this module imports each module that registers one: rings,
levels and this one), what can run on a slice or level, and the expansions that are not rings or per-level lists
(tree, recursive halving-doubling, direct exchanges).

  tree              NCCL's double binary tree: a chain inside the node, two binary trees across nodes, each
                    carrying half; pieces go up (reduce) then down (broadcast), pipelined
  halving_doubling  recursive halving reduce-scatter, recursive doubling all-gather (Rabenseifner): log2 n
                    steps each, the big exchanges with the nearest partners
  direct            all-to-all and send/recv: each message straight to its peer, all at once
Invariant: `available` names every slice-wide algorithm of an op, with the reason when it cannot run on the slice.
"""
from __future__ import annotations

import math

import numpy as np

from accelsim.arch.system import Topology
from accelsim.comm import levels, rings
from accelsim.comm.levels import REDUCING
from accelsim.comm.network import Network
from accelsim.comm.registry import PER_LEVEL, SLICE_WIDE, names, per_level_for, slice_wide, slice_wide_for
from accelsim.comm.rings import MAX_PIECES, Job

assert levels and rings, "imported for the algorithms they register"
# A tree pipelines in pieces small enough that 8 per level of depth are in flight, none under 32 KiB (NCCL's tree
# chunk rule, src/enqueue.cc: halve the chunk while nBytes / chunk < depth * 8; LL chunks are 32 KiB): otherwise
# a message under one chunk would cross every level store-and-forward.
TREE_DEPTH_PIECES = 8
TREE_MIN_PIECE = 32 << 10
SEPARATOR = ","     # between the per-level algorithms of a list, innermost level first: "ring,tree"


def registered() -> tuple[str, ...]:
    """Every registered algorithm's name, simplest first (this module has imported each that registers one)."""
    return names()


def available(op: str, net: Network) -> dict[str, str | None]:
    """Each slice-wide algorithm of `op` -> None when it can run on the slice, else why not."""
    return {name: SLICE_WIDE[name].unavailable(net) for name in slice_wide_for(op)}


def available_at(op: str, net: Network, level: int) -> dict[str, str | None]:
    """Each per-level algorithm of `op` -> None when it can run at `level` of the slice, else why not."""
    return {name: PER_LEVEL[name].unavailable(net, level) for name in per_level_for(op)}


def expand(algorithm: str, job: Job) -> None:
    """Write the transfers of `algorithm`: a slice-wide name, or per-level names joined by SEPARATOR."""
    if SEPARATOR in algorithm:
        levels.compose(job, algorithm.split(SEPARATOR))
    else:
        SLICE_WIDE[algorithm].expand(job)


def _not_on_a_torus(net: Network) -> str | None:
    return "a tree needs switched levels, not a torus" if net.dims else None


@slice_wide("tree", rank=20, ops=("allreduce",), unavailable=_not_on_a_torus)
def tree(job: Job) -> None:
    """Allreduce up and down a tree, pipelined in pieces. Per piece, every member of a level sends the piece once
    up and once down (a chain inside the innermost switched level; across a level above, the double binary
    tree's interior node sends 1 + 2 halves, its leaf copy 1 half). A level above carries one tree per member of
    the level below, spread over that member's devices' ports."""
    net = job.net
    path, share, depth = [], [], []
    for i, level in enumerate(net.active):
        c = net.egress[level]
        members = net.participants(level)
        chain = i == 0 and net.system.levels[level].topology in (Topology.switch, Topology.pcie)
        path.append(c)
        share.append(net.flows(c) / net.inside(level))
        depth.append(members - 1 if chain else math.ceil(math.log2(members)))
    pieces = max(job.pieces(job.size), min(MAX_PIECES, TREE_DEPTH_PIECES * sum(depth),
                                            math.ceil(job.size / TREE_MIN_PIECE)))
    up = job.tb.add(tuple(path), np.full(pieces, job.size / pieces), None, tuple(share), tuple(depth), sum(depth))
    job.tb.add(tuple(path), np.full(pieces, job.size / pieces), up[:, None], tuple(share), tuple(depth), sum(depth))


def _halving_unavailable(net: Network) -> str | None:
    n = net.slice.devices
    counts = [net.participants(level) for level in net.active] + [d.size for dims in net.dims.values() for d in dims]
    if n & (n - 1) or any(c & (c - 1) for c in counts):
        return f"needs a power-of-two number of devices in every level and dimension ({n} devices)"
    return None


@slice_wide("halving_doubling", rank=30, ops=REDUCING, unavailable=_halving_unavailable)
def halving_doubling(job: Job) -> None:
    """Reduce-scatter by recursive halving (step i: exchange half of what is left with the partner 2^i away,
    nearest first), all-gather by recursive doubling in the reverse order. A partner across a torus dimension
    is e hops away, and e pairs' flows share each link on the way."""
    net = job.net
    n = net.slice.devices
    steps = int(math.log2(n))
    pieces = job.pieces(job.size / 2)
    order = [("rs", i) for i in range(steps)] + [("ag", i) for i in reversed(range(steps))]
    after = None
    for kind, i in order:
        if kind not in job.passes:
            continue
        channel, share, hops = _partner(net, 1 << i)
        nbytes = job.size / pieces / (2 << i) if kind == "rs" else job.size / pieces * (1 << i) / n
        after = job.tb.add((channel,), np.full(pieces, nbytes), after, share, hops)[:, None]


def _partner(net: Network, distance: int) -> tuple[int, float, int]:
    """(channel, flows per link, hops) to the partner `distance` ranks away (ranks fill inner levels first)."""
    for level in net.active:
        inside, members = net.inside(level), net.participants(level)
        if distance < inside * members:
            local = distance // inside
            if level in net.egress:
                c = net.egress[level]
                return c, net.flows(c), 1
            span = 1
            for d in net.dims[level]:
                if local < span * d.size:
                    e = local // span
                    hops = (min(e, d.size - e) if d.wraps else e) * d.step
                    return d.plus, float(hops), hops
                span *= d.size
    raise AssertionError(f"no level holds a partner {distance} ranks away")


@slice_wide("direct", rank=70, ops=("alltoall", "sendrecv"))
def direct(job: Job) -> None:
    """All-to-all: S/n to every peer, each over the level that separates the pair (on a torus, along each
    dimension in turn, the busiest link's flows as the share, times the groups interleaved there). Through a
    switch the peers are served one after another (NCCL's point-to-point rounds), so a piece pays a hop per peer,
    the nearer level's first. Send/recv: S to the next rank, over the outermost level the slice crosses (the one
    pair that crosses it sets the time)."""
    net = job.net
    n = net.slice.devices
    pieces = job.pieces(job.size / n if job.op == "alltoall" else job.size)
    b = job.size / pieces
    if job.op == "sendrecv":
        level = net.active[-1]
        c = net.first(level)
        if level in net.dims:          # the next member `step` links on: every pair between shares those links
            step = net.dims[level][0].step
            job.tb.add((c,), np.full(pieces, b), share=step, hops=step)
            return
        job.tb.add((c,), np.full(pieces, b), share=1.0 if len(net.active) > 1 else net.flows(c))
        return
    after = None
    for level in net.active:
        inside, members = net.inside(level), net.participants(level)
        if level in net.egress:
            c = net.egress[level]
            peers = (members - 1) * inside
            after = job.tb.add((c,), np.full(pieces, b * peers / n), after, share=net.flows(c), hops=peers)[:, None]
            continue
        for d in net.dims[level]:
            own = b * inside * (members - members // d.size) / n / 2     # this device's bytes leaving along d, per way
            load = b * inside * inside / n * members / d.size * _busiest(d.size, d.wraps) * d.step   # busiest link
            far = (d.size // 2 if d.wraps else d.size - 1) * d.step
            for c in (d.plus, d.minus):
                job.tb.add((c,), np.full(pieces, own), share=load / own, hops=far)


def _busiest(size: int, wraps: bool) -> float:
    """Pairs of a line (or ring) of `size` whose shortest path crosses its busiest directed link, ties split:
    the middle link of a line, floor(D/2) x ceil(D/2); any link of a ring, D^2/8 (odd D: (D^2 - 1)/8)."""
    if not wraps:
        return float((size // 2) * ((size + 1) // 2))
    return size * size / 8 if size % 2 == 0 else (size * size - 1) / 8

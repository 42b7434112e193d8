"""A collective as a per-level list, in the style of ASTRA-sim's per-dimension algorithms: reduce-scatter inside
each level the slice crosses from the innermost out, then all-gather back in (the top level's reduce-scatter +
all-gather is its allreduce), each level by the algorithm named for it (`--algorithm ring,tree`).

  hierarchical  a ring at every level
  nvls          the levels that reduce in the switch with NVLink SHARP (NCCL's NVLS), an allreduce's other switched
                levels with a tree (NCCL's NVLSTree), the rest with rings
Invariant: every level the slice crosses gets exactly one pass per reduce-scatter or all-gather the op is made of.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from accelsim.comm.network import Network
from accelsim.comm.registry import PER_LEVEL, per_level, slice_wide
from accelsim.comm.rings import Job

REDUCING = ("allreduce", "reducescatter", "allgather")


def compose(job: Job, names: Sequence[str]) -> None:
    """Expand `job` with the per-level algorithm `names[i]` at the slice's i-th level (innermost first)."""
    net = job.net
    passes = dict(zip(net.active, (PER_LEVEL[name] for name in names), strict=True))
    inner = net.active[0]     # its passes move the largest steps: the whole piece through a switch, else 1/n of it
    pieces = job.pieces(job.size if passes[inner].whole_piece else job.size / net.participants(inner))
    full, buffer = {}, job.size / pieces
    for level in net.active:
        full[level] = buffer
        buffer /= net.participants(level)
    order = [("rs", level) for level in net.active] + [("ag", level) for level in reversed(net.active)]
    after = None
    switched = [level for level in net.active if passes[level].whole_piece]
    if switched:    # the switch's start-up (multicast group, flags), once, before any piece moves
        start = job.tb.add((net.ingress[switched[0]],), 0.0, hops=1)
        after = np.full((pieces, 1), start[0], np.int64)
    for kind, level in order:
        if kind in job.passes:
            after = passes[level].run(job, level, kind, full[level], after, pieces)


def _levels_above_one(net: Network) -> str | None:
    return None if len(net.active) > 1 else "the slice crosses one level only (use ring)"


@slice_wide("hierarchical", rank=40, ops=REDUCING, unavailable=_levels_above_one)
def hierarchical(job: Job) -> None:
    compose(job, ["ring"] * len(job.net.active))


def _no_network_reduction(net: Network) -> str | None:
    if any(net.system.levels[i].in_network_reduction for i in net.active):
        return None
    return "no level of the slice reduces in the network"


@slice_wide("nvls", rank=60, ops=REDUCING, unavailable=_no_network_reduction)
def nvls(job: Job) -> None:
    net = job.net
    reducing = [level for level in net.active if level in net.ingress]
    tree_above = bool(reducing) and job.op == "allreduce"
    compose(job, ["nvls" if level in reducing else "tree" if tree_above and level in net.egress else "ring"
                  for level in net.active])


def _reduces_in_switch(net: Network, level: int) -> str | None:
    return None if level in net.ingress else f"{net.system.levels[level].name} does not reduce in the network"


@per_level("nvls", rank=60, ops=REDUCING, unavailable=_reduces_in_switch, whole_piece=True)
def switch_pass(job: Job, level: int, kind: str, full: float, after, pieces: int):
    """NVLS: reduce-scatter has the switch pull every device's copy of each shard (out: the whole buffer; in: the
    device's reduced shard); all-gather stores a device's shard once and the switch multicasts it to all (out: one
    shard; in: the whole buffer). Out and in are separate directions, so they overlap; both move at the level's
    reduction efficiency. No hop latency: NCCL counts NVLS's latency as one figure, the level's reduction latency,
    paid once at the start (tuning.cc: latency[NVLS] = hwLatencies[NVLINK][NVLS])."""
    net = job.net
    c, r = net.egress[level], net.ingress[level]
    members = net.participants(level)
    slow = 1.0 / net.system.levels[level].reduction_efficiency   # a byte through the adders holds a link this long
    out, into = (full, full / members) if kind == "rs" else (full / members, full)
    sent = job.tb.add((c,), np.full(pieces, out), after, share=net.flows(c) * slow, hops=0)
    received = job.tb.add((r,), np.full(pieces, into), after, share=net.flows(r) * slow, hops=0)
    return np.stack([sent, received], axis=1)


def _switched(net: Network, level: int) -> str | None:
    return None if level in net.egress else f"a tree needs a switched level, not {net.system.levels[level].name}'s " \
                                            f"{net.system.levels[level].topology.value}"


@per_level("tree", rank=20, ops=("allreduce",), unavailable=_switched)
def tree_pass(job: Job, level: int, kind: str, full: float, after, pieces: int):
    """A double binary tree of the level's members: each device's shard goes up (reduce-scatter) and its result
    comes down (all-gather), as NVLSTree does above an NVLS level. Per direction a member sends its shard once
    (half as interior node of one tree, half as leaf of the other; with two members, half in all); each piece
    crosses log2(members) hops, store and forward."""
    net = job.net
    c = net.egress[level]
    members = net.participants(level)
    depth = math.ceil(math.log2(members))
    nbytes = full / 2 if members == 2 else full
    ids = job.tb.add((c,), np.full(pieces, nbytes), after, share=net.flows(c), hops=depth, stages=depth)
    return ids[:, None]

"""One tensor-parallel rank of a pipeline stage, as inference (accelsim.parallel.run) and training
(accelsim.parallel.train) alike build and price it: the batch each replica's micro-batch holds, the rank's share of
the stage's graph, and the tensor-parallel collectives in its simulated ops, sized as nccl-tests does and priced on
the system's links.
Invariant: every collective op compiler.ops.comm lowers has its collective here (COLLECTIVE_OPS).
"""
from __future__ import annotations

import math

from accelsim.arch.system import System, parse_shape
from accelsim.parallel.groups import Group, cost
from accelsim.parallel.plan import Plan
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.graph import Graph
from compiler.ops.base import COMM_DOMAIN
from compiler.ops.comm import COLLECTIVES

COLLECTIVE_OPS = {"AllReduce": "allreduce", "AllGather": "allgather", "ReduceScatter": "reducescatter"}
assert set(COLLECTIVE_OPS) == COLLECTIVES, "every collective compiler.ops.comm lowers is priced here"


def micro_batch(batch: int | None, plan: Plan) -> int:
    """The samples in one micro-batch of one data-parallel replica: the global `batch` (default: one a micro-batch)
    over dp x mb. UserError for a batch that is not a positive integer or does not split evenly."""
    per = plan.dp * plan.microbatches
    batch = batch or per
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise UserError(f"batch {batch!r}: must be a positive integer")
    if batch % per:
        raise UserError(f"batch {batch} does not split over dp={plan.dp} replicas x mb={plan.microbatches} "
                        f"micro-batches ({per} per step); use a multiple of {per}")
    return batch // per


def slice_shape(text: str | None) -> tuple[int, ...] | None:
    """`--slice 4x4x4` as a shape, None when no slice is asked for."""
    return None if text is None else parse_shape(text)


def partition(graph: Graph, plan: Plan) -> Graph:
    """One tensor-parallel rank's share of a stage's graph under `plan` (tp ranks, sequence parallelism, AlexNet's
    groups), with the collectives that join the ranks (compiler.parallel.tensor)."""
    from compiler.parallel.tensor import partition as split_ranks
    return split_ranks(graph, plan.tp, sequence_parallel=plan.sp, groups=plan.groups)


def tp_collective(sys_: System, tp: Group, op) -> tuple[str, float] | None:
    """A simulated op priced as a tensor-parallel collective on `tp`'s links: (collective, seconds each time it
    runs); None when the op is not a collective, the group is one rank or the links carry nothing."""
    kind = COLLECTIVE_OPS.get(op.op) if not tp.trivial else None
    if kind is None:
        return None
    priced = cost(sys_, tp, kind, collective_size(op, tp.size))
    return (kind, priced.seconds) if priced else None


def places(graph: Graph) -> dict[str, tuple[str, str]]:
    """Per comm node of `graph`: (the node that made what it moves, the first node that reads the result)."""
    producer = graph.producers()
    reader: dict[str, str] = {}
    for node in graph.nodes:
        for name in node.inputs:
            reader.setdefault(name, node.name)
    return {n.name: (producer[n.inputs[0]].name if n.inputs[0] in producer else n.inputs[0],
                     reader.get(n.outputs[0], "output")) for n in graph.nodes if n.domain == COMM_DOMAIN}


def transfer(op, placed: dict[str, tuple[str, str]], kind: str, phase: str, seconds: float, ranks: int) -> dict:
    """One tensor-parallel collective of a pass, where it falls: after the layer that made its data, before the
    one that reads it (AlexNet's split: pool2 into conv3, then into fc6, fc7 and fc8)."""
    after, before = placed.get(op.node, ("", ""))
    return {"node": op.node, "collective": kind, "phase": phase, "after": after, "before": before,
            "bytes": collective_size(op, ranks), "seconds": seconds}


def collective_size(op, ranks: int) -> int:
    """nccl-tests' size of a collective op of a simulated Result: the all-reduced tensor, the gathered whole, or the
    whole before its scatter (each of the `ranks` keeps 1/ranks of it)."""
    nbytes = DType.parse(op.dtype).nbytes(math.prod(op.shape))
    return nbytes * ranks if op.op == "ReduceScatter" else nbytes

"""Collectives between the ranks of a parallel group, in the domain `ai.accelsim.comm` (they are not ONNX ops):
AllReduce, AllGather, ReduceScatter, and the two local ops that mark where replicated data enters a sharded region:
ParallelEnter (Megatron's "f": the identity forward, its gradient all-reduced backward) and Shard (this rank's
slice of a replicated tensor: Megatron's "scatter", no communication). Every one has attributes `group` (a name:
"tp", "dp"...) and `size` (ranks in the group); AllGather, ReduceScatter and Shard also `axis`; AllReduce
`reduction`, sum (the default) or max (vocab-parallel cross-entropy's row maxima, NCCL's ncclMax).

Invariant: a collective's value depends on every rank's input, so its `reference` refuses a single graph (the ranks
run together in compiler.parallel.group.run_ranks, which calls `combine` with every rank's arguments); each lowers to
one `Collective`, a zero-byte view Move whose `op` is the node's op, and which accelsim prices on links itself
when `op in COLLECTIVES` (the ops that move data between ranks).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from compiler.errors import ModelError
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Move
from compiler.ops.base import (COMM_DOMAIN, OpDef, fail, input_operands, normalize_axis, out, output_operand,
                               register, require)

COLLECTIVES = frozenset({"AllReduce", "AllGather", "ReduceScatter"})    # these move bytes between ranks
LOCAL = frozenset({"ParallelEnter", "Shard"})                           # these mark layouts, moving nothing
# AllGather's backward pass: `reduce_scatter` when what reads the gathered tensor is itself sharded (each rank's
# consumers give a partial gradient: sequence parallelism's entry into a column-parallel layer); `shard` when the
# consumers are replicated (every rank computes the same thing from it, so each takes its slice of the gradient:
# the logits gathered before the loss).
GATHER_GRADS = ("reduce_scatter", "shard")
REDUCTIONS = ("sum", "max")          # AllReduce's, the first the default


@dataclass(frozen=True, kw_only=True)
class Collective(Move):
    """A comm node in the IR: a view (zero bytes, zero time in the tile engine) that names its group."""

    group: str
    size: int
    axis: int | None = None


def group_of(node: Node) -> tuple[str, int]:
    """(group, size), checked: a non-empty name and at least one rank."""
    group, size = node.attr("group"), node.attr("size")
    if not isinstance(group, str) or not group:
        raise fail(node, f"attribute group {group!r} must name the parallel group (\"tp\", \"dp\", ...)")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise fail(node, f"attribute size {size!r} must be the number of ranks in the group, at least 1")
    return group, int(size)


def refuse(node: Node) -> Callable[..., np.ndarray]:
    """What a comm node computes on one graph alone: nothing; the error says where its value comes from."""
    def run(*_arrays: np.ndarray) -> np.ndarray:
        group, size = node.attr("group"), node.attr("size")
        raise ModelError(f"{node.where()} combines the {size} ranks of group {group!r}: a single rank's graph "
                         f"cannot compute it; run all ranks' graphs together (compiler.parallel.group.run_ranks)")
    return run


class CommOp(OpDef):
    foldable = False        # never folded at import time: even a constant input's collective needs the ranks
    has_axis = False        # the op works along attribute `axis`
    sized = False           # `axis` is split into `size` parts, so size must divide its length

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        _, size = group_of(node)
        shape = list(x.shape)
        if self.has_axis:
            axis = normalize_axis(node, int(node.attr("axis", 0)), len(shape))
            if self.sized and shape[axis] % size:
                raise fail(node, f"cannot split {x.name!r} of shape {shape} over {size} ranks: axis {axis} has "
                                 f"{shape[axis]} entries, not a multiple of {size}")
            shape[axis] = self.local(shape[axis], size)
        return [out(node, shape, x.dtype)]

    def local(self, length: int, size: int) -> int:
        return length

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [refuse(node)()]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        group, size = group_of(node)
        rank = len(graph.tensor(node.inputs[0]).shape)
        axis = normalize_axis(node, int(node.attr("axis", 0)), rank) if self.has_axis else None
        return [Collective(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                           output=output_operand(node, graph), fn=refuse(node), view=True, group=group, size=size,
                           axis=axis)]

    def combine(self, node: Node, args: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        """Every rank's outputs from every rank's arguments (args[rank][input])."""
        raise NotImplementedError

    def axis(self, node: Node, x: np.ndarray) -> int:
        return normalize_axis(node, int(node.attr("axis", 0)), x.ndim)


def _total(arrays: list[np.ndarray]) -> np.ndarray:
    """The sum over ranks in rank order (every rank gets the same bits, as a ring all-reduce gives them)."""
    total = np.array(arrays[0], copy=True)
    for a in arrays[1:]:
        total = total + a
    return total


@register("AllReduce", domain=COMM_DOMAIN)
class AllReduce(CommOp):
    """Every rank gets the sum (reduction="max": the element-wise maximum) of every rank's tensor."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        reduction = node.attr("reduction", REDUCTIONS[0])
        if reduction not in REDUCTIONS:
            raise fail(node, f"attribute reduction {reduction!r} must be one of {', '.join(REDUCTIONS)}")
        return super().infer(node, ins, graph)

    def combine(self, node: Node, args: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        arrays = [a[0] for a in args]
        total = _total(arrays) if node.attr("reduction", REDUCTIONS[0]) == "sum" else np.maximum.reduce(arrays)
        return [[total.copy()] for _ in args]


@register("AllGather", domain=COMM_DOMAIN)
class AllGather(CommOp):
    """Every rank gets the ranks' tensors concatenated along `axis`, in rank order."""

    has_axis = True

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        grad = node.attr("grad", GATHER_GRADS[0])
        if grad not in GATHER_GRADS:
            raise fail(node, f"attribute grad {grad!r} must be one of {', '.join(GATHER_GRADS)}")
        return super().infer(node, ins, graph)

    def local(self, length: int, size: int) -> int:
        return length * size

    def combine(self, node: Node, args: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        whole = np.concatenate([a[0] for a in args], axis=self.axis(node, args[0][0]))
        return [[whole.copy()] for _ in args]


@register("ReduceScatter", domain=COMM_DOMAIN)
class ReduceScatter(CommOp):
    """Rank r gets slice r (of `size` equal ones along `axis`) of the sum of every rank's tensor."""

    has_axis = sized = True

    def local(self, length: int, size: int) -> int:
        return length // size

    def combine(self, node: Node, args: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        total = _total([a[0] for a in args])
        return [[part] for part in np.split(total, len(args), axis=self.axis(node, total))]


@register("ParallelEnter", domain=COMM_DOMAIN)
class ParallelEnter(CommOp):
    """The identity on every rank; its gradient is all-reduced (the tensor feeds computations split over ranks,
    each of which contributes part of its gradient)."""

    def combine(self, node: Node, args: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        return [[a[0]] for a in args]


@register("Shard", domain=COMM_DOMAIN)
class Shard(CommOp):
    """Rank r keeps slice r of a tensor every rank holds whole; its gradient is all-gathered."""

    has_axis = sized = True

    def local(self, length: int, size: int) -> int:
        return length // size

    def combine(self, node: Node, args: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        return [[np.split(a[0], len(args), axis=self.axis(node, a[0]))[r]] for r, a in enumerate(args)]

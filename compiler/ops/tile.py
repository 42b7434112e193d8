"""Tile: repeat the input `repeats[i]` times along each axis i. One Move that writes every copy.

Invariant: repeats is a compile-time 1-D int64 list of one count >= 0 per axis; the output's dims are the input's
times those.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, const_input, fail, given, move_op, operand, out, register, require


def repeats_of(node: Node, rank: int, value: ArrayLike) -> tuple[int, ...]:
    counts = np.asarray(value).reshape(-1)
    if counts.size != rank or np.any(counts < 0):
        raise fail(node, f"repeats {counts.tolist()} must give one count >= 0 for each of the {rank} axes")
    return tuple(int(c) for c in counts)


@register("Tile")
class Tile(OpDef):
    value_inputs = (1,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, repeats = require(node, ins, 2)
        if repeats.dtype != DType.int64 or len(repeats.shape) != 1 or repeats.shape[0] != len(x.shape):
            raise fail(node, f"repeats ({repeats.name!r}) must be a 1-D int64 list of {len(x.shape)} counts, got "
                             f"{repeats.dtype.value} {list(repeats.shape)}")
        counts = repeats_of(node, len(x.shape), const_input(node, graph, 1, "repeats"))
        return [out(node, [d * c for d, c in zip(x.shape, counts)], x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        data, repeats = given(node, args, 2)
        x = np.asarray(data)
        return [np.tile(x, repeats_of(node, x.ndim, repeats))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        counts = repeats_of(node, len(graph.tensor(node.inputs[0]).shape), const_input(node, graph, 1, "repeats"))
        data = (operand(graph, node.inputs[0]),)
        return [move_op(node, graph, lambda x: np.tile(x, counts), inputs=data)]

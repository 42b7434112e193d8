"""Expand: broadcast the input to a constant shape (each side's 1s stretch, as in numpy). One Move.

Invariant: the output shape is np.broadcast_shapes(input shape, requested shape).
"""
from __future__ import annotations

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, broadcast, const_input, fail, move_op, operand, out, register, require


@register("Expand")
class Expand(OpDef):
    value_inputs = (1,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x = require(node, ins, 2)[0]
        spec = const_input(node, graph, 1, "the target shape")
        if spec.ndim != 1 or np.any(spec < 0):
            raise fail(node, f"the shape input must be a 1-D list of sizes >= 0, got {spec.tolist()}")
        return [out(node, broadcast(node, x.shape, tuple(int(d) for d in spec)), x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        shape = np.broadcast_shapes(x.shape, tuple(int(d) for d in np.asarray(args[1]).reshape(-1)))
        return [np.broadcast_to(x, shape).copy()]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        shape = graph.tensor(node.outputs[0]).shape
        data = (operand(graph, node.inputs[0]),)
        return [move_op(node, graph, lambda x: np.broadcast_to(x, shape).copy(), inputs=data)]

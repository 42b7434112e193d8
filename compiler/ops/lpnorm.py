"""LpNormalization (p = 1 or 2 along one axis) -> one Reduce over that axis.

Invariant: y = x / ||x||_p along `axis` (default -1), in fp32 (fp64 stays fp64); a row whose norm is 0 gives 0, as
onnxruntime and the ONNX reference compute it.
"""
from __future__ import annotations

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import (OpDef, fail, input_operands, normalize_axis, out, output_operand, register,
                               require)
from compiler.ops.batchnorm import in_work


@register("LpNormalization")
class LpNormalization(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        if not x.dtype.is_float:
            raise fail(node, f"input is {x.dtype.value}; LpNormalization takes a float tensor")
        if node.attr("p", 2) not in (1, 2):
            raise fail(node, f"attribute p={node.attr('p')} is not allowed (1 or 2)")
        normalize_axis(node, int(node.attr("axis", -1)), len(x.shape))
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        return [_normalize(x, normalize_axis(node, int(node.attr("axis", -1)), x.ndim), int(node.attr("p", 2)))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        axis = normalize_axis(node, int(node.attr("axis", -1)), len(graph.tensor(node.inputs[0]).shape))
        p = int(node.attr("p", 2))
        # Per element: abs (p=1) or square (p=2), the sum's add and the divide (3); the sqrt is per row.
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                       output=output_operand(node, graph), axes=(axis,), ops_per_element=3,
                       fn=lambda x: _normalize(np.asarray(x), axis, p))]


def _normalize(x: np.ndarray, axis: int, p: int) -> np.ndarray:
    work = in_work(x)
    if p == 1:
        norm = np.abs(work).sum(axis=axis, keepdims=True)
    else:
        norm = np.sqrt((work * work).sum(axis=axis, keepdims=True))
    safe = np.where(norm == 0, 1, norm)
    return np.where(norm == 0, 0, work / safe).astype(x.dtype)

"""MeanVarianceNormalization -> one Reduce over `axes` (default [0, 2, 3]: per channel across the batch).

Invariant: y = (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9), the ONNX function body and onnxruntime's kernel, in fp32
(fp64 stays fp64).
"""
from __future__ import annotations

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import (OpDef, fail, input_operands, normalize_axis, out, output_operand, register,
                               require)
from compiler.ops.batchnorm import in_work

EPSILON = 1e-9   # fixed by the ONNX function body; the op has no epsilon attribute


@register("MeanVarianceNormalization")
class MeanVarianceNormalization(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        if not x.dtype.is_float:
            raise fail(node, f"input is {x.dtype.value}; MeanVarianceNormalization takes a float tensor")
        _axes(node, len(x.shape))
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        return [_normalize(x, _axes(node, x.ndim))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        axes = _axes(node, len(graph.tensor(node.inputs[0]).shape))
        # Per element: the mean's add, a square and its add, the subtract and the divide (5); the sqrt is per row.
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                       output=output_operand(node, graph), axes=axes, ops_per_element=5,
                       fn=lambda x: _normalize(np.asarray(x), axes))]


def _axes(node: Node, rank: int) -> tuple[int, ...]:
    listed = list(node.attr("axes", [0, 2, 3]))
    axes = sorted({normalize_axis(node, int(a), rank) for a in listed})
    if len(axes) != len(listed) or not axes:
        raise fail(node, f"attribute axes={listed} must name distinct axes of the rank-{rank} input, at least one")
    return tuple(axes)


def _normalize(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    work = in_work(x)
    mean = work.mean(axis=axes, keepdims=True)
    with np.errstate(invalid="ignore"):   # E[x^2] - E[x]^2 a hair below 0 gives NaN, as in onnxruntime
        std = np.sqrt((work * work).mean(axis=axes, keepdims=True) - mean * mean)
    y: np.ndarray = (work - mean) / (std + work.dtype.type(EPSILON))
    return y.astype(x.dtype)

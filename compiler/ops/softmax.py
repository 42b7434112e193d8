"""Softmax and LogSoftmax -> one Reduce: before opset 13 over every axis from `axis` on (the input
coerced to 2-D there), from opset 13 over the single axis `axis`.

Invariant: the numerically stable form, max subtracted first, as onnxruntime computes it.
"""
from __future__ import annotations

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import (OpDef, fail, input_operands, normalize_axis, out, output_operand,
                               register, require)

SINGLE_AXIS_OPSET = 13


class _Softmax(OpDef):
    log = False

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        require(node, ins, 1)
        x = ins[0]
        if not x.dtype.is_float:
            raise fail(node, f"input is {x.dtype.value}; {node.op} takes a float tensor")
        node.resolved["opset"] = graph.opset  # the axis rule changed in opset 13; reference sees no graph
        _axes(node, len(x.shape))
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [_softmax(args[0], _axes(node, args[0].ndim), self.log)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        axes, log = _axes(node, len(graph.tensor(node.inputs[0]).shape)), self.log
        # Per element: a max compare, a subtract, an exp and a sum add, then a divide (Softmax) or a
        # subtract of the per-row log (LogSoftmax): 5 ops either way.
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                       output=output_operand(node, graph), axes=axes, ops_per_element=5,
                       fn=lambda x: _softmax(x, axes, log))]


@register("Softmax")
class Softmax(_Softmax):
    log = False


@register("LogSoftmax")
class LogSoftmax(_Softmax):
    log = True


def _axes(node: Node, rank: int) -> tuple[int, ...]:
    opset = node.resolved.get("opset", SINGLE_AXIS_OPSET)
    single = opset >= SINGLE_AXIS_OPSET
    axis = normalize_axis(node, int(node.attr("axis", -1 if single else 1)), rank)
    # Before opset 13 the input is flattened to [prod(shape[:axis]), prod(shape[axis:])] and
    # normalised along the second axis: the same as normalising over all trailing axes together.
    return (axis,) if single else tuple(range(axis, rank))


def _softmax(x: np.ndarray, axes: tuple[int, ...], log: bool) -> np.ndarray:
    work = np.float64 if x.dtype == np.float64 else np.float32
    shifted = x.astype(work) - x.astype(work).max(axis=axes, keepdims=True)
    exp = np.exp(shifted)
    total = exp.sum(axis=axes, keepdims=True)
    y = shifted - np.log(total) if log else exp / total
    return y.astype(x.dtype)

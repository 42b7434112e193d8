"""Softmax, LogSoftmax and Hardmax -> one Reduce: before opset 13 over every axis from `axis` on (the input
coerced to 2-D there), from opset 13 over the single axis `axis`.

Invariant: the numerically stable form, max subtracted first, as onnxruntime computes it; Hardmax puts a 1 at the
first maximum of each row (the trailing axes taken together before opset 13) and 0 elsewhere.
"""
from __future__ import annotations

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import OpDef, fail, given, input_operands, normalize_axis, out, output_operand, register, require

SINGLE_AXIS_OPSET = 13


class _Softmax(OpDef):
    log = False
    # Per element: a max compare, a subtract, an exp and a sum add, then a divide (Softmax) or a
    # subtract of the per-row log (LogSoftmax): 5 ops either way.
    ops_per_element = 5

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        if not x.dtype.is_float:
            raise fail(node, f"input is {x.dtype.value}; {node.op} takes a float tensor")
        node.resolved["opset"] = graph.opset  # the axis rule changed in opset 13; reference sees no graph
        _axes(node, len(x.shape))
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        (x,) = given(node, args, 1)
        return [self.compute(x, _axes(node, x.ndim))]

    def compute(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return _softmax(x, axes, self.log)

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        axes = _axes(node, len(graph.tensor(node.inputs[0]).shape))
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                       output=output_operand(node, graph), axes=axes, ops_per_element=self.ops_per_element,
                       fn=lambda x: self.compute(x, axes))]


@register("Softmax")
class Softmax(_Softmax):
    log = False


@register("LogSoftmax")
class LogSoftmax(_Softmax):
    log = True


@register("Hardmax")
class Hardmax(_Softmax):
    ops_per_element = 2   # a compare for the row's first maximum, a select writing 1 or 0

    def compute(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return _hardmax(x, axes)


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
    result: np.ndarray = y.astype(x.dtype)
    return result


def _hardmax(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """One-hot of the first maximum over `axes` (consecutive, trailing before opset 13), in C order within them."""
    moved = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim))
    rows: np.ndarray = moved.reshape(moved.shape[:x.ndim - len(axes)] + (-1,))
    hot = np.zeros(rows.shape, dtype=x.dtype)
    if rows.shape[-1]:
        np.put_along_axis(hot, np.argmax(rows, axis=-1)[..., None], 1, axis=-1)
    return np.moveaxis(hot.reshape(moved.shape), range(x.ndim - len(axes), x.ndim), axes)

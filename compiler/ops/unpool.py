"""MaxUnpool: put each pooled value back at the flat position MaxPool's indices recorded, zeros elsewhere. The
output's spatial size is (in - 1) * stride - pads + kernel, or the output_shape input when given (the shape of the
tensor MaxPool read, which several input sizes pool alike). One Move that writes the output.

Invariant: indices have the input's shape and index the flattened output (N, C, spatial...), as onnxruntime and
PyTorch read them. (onnx's own reference instead indexes the computed size and pads it out to output_shape, which
its conformance case with output_shape encodes; onnxruntime is followed here.)
"""
from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, const_input, fail, given, move_op, operand, optional, out, register, require


def unpooled_shape(node: Node, x: tuple[int, ...]) -> tuple[int, ...]:
    kernel = list(node.attr("kernel_shape") or [])
    dims = len(x) - 2
    if dims < 1 or len(kernel) != dims:
        raise fail(node, f"kernel_shape {kernel} must give one size for each of the {max(dims, 0)} spatial axes "
                         f"of input {list(x)} (N, C, spatial...)")
    strides = list(node.attr("strides", [1] * dims))
    pads = list(node.attr("pads", [0] * 2 * dims))
    if len(strides) != dims or len(pads) != 2 * dims:
        raise fail(node, f"strides {strides} and pads {pads} must have {dims} and {2 * dims} entries")
    return x[:2] + tuple((x[2 + i] - 1) * strides[i] - pads[i] - pads[dims + i] + kernel[i] for i in range(dims))


def max_unpool(node: Node, x: np.ndarray, indices: ArrayLike, shape: ArrayLike | None) -> np.ndarray:
    shape = unpooled_shape(node, x.shape) if shape is None else tuple(int(d) for d in np.asarray(shape).reshape(-1))
    flat = np.zeros(math.prod(shape), dtype=x.dtype)
    where = np.asarray(indices).astype(np.int64).reshape(-1)
    if where.size and (where.min() < 0 or where.max() >= flat.size):
        raise fail(node, f"index {int(where[(where < 0) | (where >= flat.size)][0])} is out of range for the "
                         f"{flat.size} elements of the output shape {list(shape)}")
    flat[where] = x.reshape(-1)
    return flat.reshape(shape)


@register("MaxUnpool")
class MaxUnpool(OpDef):
    value_inputs = (2,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, indices = require(node, ins, 2, 3)
        if indices.dtype != DType.int64 or indices.shape != x.shape:
            raise fail(node, f"indices {indices.name!r} must be int64 of the input's shape {list(x.shape)}, got "
                             f"{indices.dtype.value} {list(indices.shape)}")
        shape = unpooled_shape(node, x.shape)
        if len(ins) > 2 and ins[2] is not None:
            given = tuple(int(d) for d in const_input(node, graph, 2, "output_shape").reshape(-1))
            if len(given) != len(shape) or given[:2] != shape[:2]:
                raise fail(node, f"output_shape {list(given)} must have rank {len(shape)} and start with the "
                                 f"input's N and C {list(shape[:2])}")
            shape = given
        return [out(node, shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, indices = given(node, args, 2)
        return [max_unpool(node, np.asarray(x), indices, optional(args, 2))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        shape = graph.value(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
        data = tuple(operand(graph, name) for name in node.inputs[:2])
        return [move_op(node, graph, lambda x, i: max_unpool(node, np.asarray(x), i, shape), inputs=data)]

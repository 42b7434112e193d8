"""HannWindow, HammingWindow, BlackmanWindow (opset 17): a window of `size` samples from cosines of 2 pi n / N.

Invariant: N is `size` for a periodic window (the default) and size - 1 for a symmetric one; the values are computed
in float64 and cast to output_datatype (float by default). The window is usually folded at import (a constant size);
otherwise it is one Map that reads nothing and computes each sample (the size must be known to simulate).
"""
from __future__ import annotations

import math

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map
from compiler.ops.base import OpDef, fail, out, output_operand, register, require
from compiler.ops.runtime import forget_stand_in, known_input, require_static, stand_in

# op -> (cosine coefficients a_k of sum_k a_k cos(2 pi k n / N), vector ops per sample): each cosine costs a
# multiply, a range reduction and polynomial (10, as Cos), and a multiply-add into the sum.
WINDOWS = {
    "HannWindow": ((0.5, -0.5), 12),
    "HammingWindow": ((25.0 / 46.0, -(1 - 25.0 / 46.0)), 12),
    "BlackmanWindow": ((0.42, -0.5, 0.08), 24),
}


@register(*WINDOWS)
class Window(OpDef):
    value_inputs = (0,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (size_input,) = require(node, ins, 1)
        if size_input.elements != 1 or size_input.dtype not in (DType.int32, DType.int64):
            raise fail(node, f"size {size_input.name!r} must be an int32 or int64 scalar, got "
                             f"{size_input.dtype.value} {list(size_input.shape)}")
        if node.attr("periodic", 1) not in (0, 1):
            raise fail(node, f"attribute periodic={node.attr('periodic')} is not allowed (0 or 1)")
        dtype = DType.from_onnx(int(node.attr("output_datatype", 1)), node.where())
        size = known_input(node, graph, 0)
        if size is None:
            return [out(node, stand_in(node, (1,), f"the size (input {node.inputs[0]!r})"), dtype)]
        forget_stand_in(node)
        if int(size.reshape(-1)[0]) < 0:
            raise fail(node, f"size {int(size.reshape(-1)[0])} is negative")
        return [out(node, (int(size.reshape(-1)[0]),), dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [_window(node, int(np.asarray(args[0]).reshape(-1)[0]))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        require_static(node)
        size = graph.tensor(node.outputs[0]).shape[0]
        return [Map(name=node.name, node=node.name, op=node.op, inputs=(), output=output_operand(node, graph),
                    fn=lambda: _window(node, size), ops_per_element=WINDOWS[node.op][1])]


def _window(node: Node, size: int) -> np.ndarray:
    period = size if node.attr("periodic", 1) else size - 1
    n = np.arange(size, dtype=np.float64)
    y = np.zeros(size, dtype=np.float64)
    for k, a in enumerate(WINDOWS[node.op][0]):
        y += a * np.cos(2 * math.pi * k * n / period) if period else a
    dtype = DType.from_onnx(int(node.attr("output_datatype", 1)), node.where())
    return y.astype(dtype.numpy)

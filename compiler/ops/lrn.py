"""LRN (AlexNet's local response normalisation across channels) -> one Reduce over the channel axis.

Invariant: y = x / (bias + alpha/size * sum of x^2 over a window of `size` channels)^beta, as ONNX defines.
"""
from __future__ import annotations

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import OpDef, fail, given, input_operands, out, output_operand, register, require


@register("LRN")
class LRN(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, = require(node, ins, 1)
        if len(x.shape) < 3 or not x.dtype.is_float:
            raise fail(node, f"input is {x.dtype.value} {list(x.shape)}; LRN takes a float tensor "
                             f"N x C x spatial...")
        window_size(node)
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [_lrn(node, given(node, args, 1)[0])]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        # Per element: a square, `size` adds over the channel window, scale and bias (2), a power
        # and a divide: size + 5 ops. It reduces across channels but keeps the input's shape.
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                       output=output_operand(node, graph), axes=(1,), ops_per_element=window_size(node) + 5,
                       fn=lambda x: _lrn(node, x))]


def window_size(node: Node) -> int:
    """The LRN node's window, in channels (its gradient's too); not a positive integer: an error naming the node."""
    size = node.attr("size")
    if size is None or int(size) < 1:
        raise fail(node, f"attribute size must be a positive integer (channels in the window), got {size}")
    return int(size)


def _lrn(node: Node, x: np.ndarray) -> np.ndarray:
    size = window_size(node)
    alpha, beta, bias = (float(node.attr(k, d)) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    work = np.float64 if x.dtype == np.float64 else np.float32
    square = x.astype(work) ** 2
    # the window of channel c is [c - floor((size-1)/2), c + ceil((size-1)/2)], clipped to the channels
    below, above = (size - 1) // 2, size - 1 - (size - 1) // 2
    padded = np.pad(square, [(0, 0), (below, above)] + [(0, 0)] * (x.ndim - 2))
    total = sum(padded[:, i:i + x.shape[1]] for i in range(size))
    denominator: np.ndarray = (bias + alpha / size * total) ** beta
    scaled: np.ndarray = x.astype(work)
    result: np.ndarray = (scaled / denominator).astype(x.dtype)
    return result

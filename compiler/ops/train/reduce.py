"""Gradients that need whole rows: Softmax's and LogSoftmax's (a sum over the softmax axis) and ReduceMax's (the
gradient goes to the maxima, split evenly between ties as PyTorch's amax does). Each lowers to one Reduce over its
axes with the input's shape, so a chunk never cuts a row.

SoftmaxGrad(dy, y): y * (dy - sum(dy * y));  LogSoftmaxGrad(dy, y): dy - exp(y) * sum(dy);
ReduceMaxGrad(dy, x, y): dy * (x == y) / count(x == y), dy and y with the reduced axes kept (size 1).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import (TRAINING_DOMAIN, OpDef, broadcast, fail, given, input_operands, out, output_operand,
                               register, require)
from compiler.ops.train import attr_axes, work


def _softmax(dy: np.ndarray, y: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    dy, y = work(dy, y)
    dx: np.ndarray = y * (dy - (dy * y).sum(axis=axes, keepdims=True))
    return dx


def _log_softmax(dy: np.ndarray, y: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    dy, y = work(dy, y)
    dx: np.ndarray = dy - np.exp(y) * dy.sum(axis=axes, keepdims=True)
    return dx


def _reduce_max(dy: np.ndarray, x: np.ndarray, y: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    dy, x, y = work(dy, x, y)
    hit = x == y
    dx: np.ndarray = dy * hit / hit.sum(axis=axes, keepdims=True)
    return dx


# op -> (function of (inputs..., axes), ops per input element, number of inputs)
GRADIENTS: dict[str, tuple[Callable[..., np.ndarray], int, int]] = {
    "SoftmaxGrad": (_softmax, 4, 2), "LogSoftmaxGrad": (_log_softmax, 4, 2), "ReduceMaxGrad": (_reduce_max, 3, 3)}


@register(*GRADIENTS, domain=TRAINING_DOMAIN)
class RowGrad(OpDef):
    """Attribute `axes`: the softmax axis, or ReduceMax's reduced axes."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        tensors = require(node, ins, GRADIENTS[node.op][2])
        full = tensors[1].shape
        for t in tensors:
            if len(t.shape) != len(full) or broadcast(node, t.shape, full) != full:
                raise fail(node, f"{t.name!r} has shape {list(t.shape)}; every input must have rank {len(full)} and "
                                 f"broadcast to {list(full)}")
        attr_axes(node, len(full))
        return [out(node, full, tensors[0].dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        axes = attr_axes(node, np.asarray(args[1]).ndim)
        with np.errstate(all="ignore"):
            dx = GRADIENTS[node.op][0](*args, axes)
        return [np.asarray(dx).astype(given(node, args, 1)[0].dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        axes = attr_axes(node, len(graph.tensor(node.inputs[1]).shape))
        inputs = input_operands(node, graph)
        first = 1 if node.op == "ReduceMaxGrad" else 0     # the Reduce's first input has the full shape
        order = inputs[first:first + 1] + inputs[:first] + inputs[first + 1:]

        def gradient(*arrays: np.ndarray) -> np.ndarray:
            args: list[np.ndarray | None] = [*arrays[1:first + 1], arrays[0], *arrays[first + 1:]]
            return self.reference(node, args)[0]
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=order, output=output_operand(node, graph),
                       axes=axes, ops_per_element=GRADIENTS[node.op][1], fn=gradient)]

"""Gradients that need whole rows: Softmax's and LogSoftmax's (a sum over the softmax axis) and ReduceMax's (the
gradient goes to the maxima, split evenly between ties as PyTorch's amax does). Each lowers to one Reduce over its
axes with the input's shape, so a chunk never cuts a row.

SoftmaxGrad(dy, y): y * (dy - sum(dy * y));  LogSoftmaxGrad(dy, y): dy - exp(y) * sum(dy);
ReduceMaxGrad(dy, x, y): dy * (x == y) / count(x == y), dy and y with the reduced axes kept (size 1).
"""
from __future__ import annotations

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import (TRAINING_DOMAIN, OpDef, broadcast, fail, input_operands, out,
                               output_operand, register, require)
from compiler.ops.train import attr_axes, work


def _softmax(dy, y, axes):
    dy, y = work(dy, y)
    return y * (dy - (dy * y).sum(axis=axes, keepdims=True))


def _log_softmax(dy, y, axes):
    dy, y = work(dy, y)
    return dy - np.exp(y) * dy.sum(axis=axes, keepdims=True)


def _reduce_max(dy, x, y, axes):
    dy, x, y = work(dy, x, y)
    hit = x == y
    return dy * hit / hit.sum(axis=axes, keepdims=True)


# op -> (function of (inputs..., axes), ops per input element, number of inputs)
GRADIENTS = {"SoftmaxGrad": (_softmax, 4, 2), "LogSoftmaxGrad": (_log_softmax, 4, 2),
             "ReduceMaxGrad": (_reduce_max, 3, 3)}


@register(*GRADIENTS, domain=TRAINING_DOMAIN)
class RowGrad(OpDef):
    """Attribute `axes`: the softmax axis, or ReduceMax's reduced axes."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        require(node, ins, GRADIENTS[node.op][2])
        full = ins[1].shape
        for t in ins:
            if len(t.shape) != len(full) or broadcast(node, t.shape, full) != full:
                raise fail(node, f"{t.name!r} has shape {list(t.shape)}; every input must have rank {len(full)} and "
                                 f"broadcast to {list(full)}")
        attr_axes(node, len(full))
        return [out(node, full, ins[0].dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        axes = attr_axes(node, np.asarray(args[1]).ndim)
        with np.errstate(all="ignore"):
            dx = GRADIENTS[node.op][0](*args, axes)
        return [np.asarray(dx).astype(args[0].dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        axes = attr_axes(node, len(graph.tensor(node.inputs[1]).shape))
        inputs = input_operands(node, graph)
        first = 1 if node.op == "ReduceMaxGrad" else 0     # the Reduce's first input has the full shape
        order = inputs[first:first + 1] + inputs[:first] + inputs[first + 1:]

        def gradient(*arrays):
            args = list(arrays[1:first + 1]) + [arrays[0]] + list(arrays[first + 1:])
            return self.reference(node, args)[0]
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=order, output=output_operand(node, graph),
                       axes=axes, ops_per_element=GRADIENTS[node.op][1], fn=gradient)]

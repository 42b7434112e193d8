"""Gradient rules of reductions and of softmax: a sum or mean spreads dy back over what it reduced, a max sends it
to the maxima, softmax's needs the row sum of dy * y (one Reduce, compiler/ops/train/reduce.py)."""
from __future__ import annotations

import math

import numpy as np

from compiler.errors import ModelError
from compiler.ops.reduce import reduced_axes
from compiler.ops.softmax import SINGLE_AXIS_OPSET
from compiler.graph import Node
from compiler.train.autodiff import Grads, Tape, output_grad, rule


def _axes(t: Tape, node: Node) -> tuple[int, ...] | None:
    value = t.graph.value(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
    return reduced_axes(node, value, len(t.shape(node.inputs[0])))


def _kept(t: Tape, node: Node, tensor: str, axes: tuple[int, ...]) -> str:
    """`tensor` (a reduction's output or its gradient) reshaped with the reduced axes kept as size 1."""
    shape = t.shape(node.inputs[0])
    return t.reshape(tensor, tuple(1 if i in axes else d for i, d in enumerate(shape)))


@rule("ReduceSum", "ReduceMean")
def reduce_sum(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    axes = _axes(t, node)
    dy = output_grad(node, dys)
    if axes is None:                   # noop_with_empty_axes: the identity
        return [dy] + [None] * (len(node.inputs) - 1)
    shape = t.shape(node.inputs[0])
    grad = t.node("Expand", [_kept(t, node, dy, axes), t.ints(shape)])
    if node.op == "ReduceMean":
        count = math.prod(shape[a] for a in axes)
        grad = t.node("Mul", [grad, t.const(np.asarray(1.0 / count), t.dtype(dy), "mean")])
    return [grad] + [None] * (len(node.inputs) - 1)


@rule("ReduceMax")
def reduce_max(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    axes = _axes(t, node)
    dy = output_grad(node, dys)
    if axes is None:
        return [dy] + [None] * (len(node.inputs) - 1)
    grad = t.node("ReduceMaxGrad", [_kept(t, node, dy, axes), node.inputs[0], _kept(t, node, node.outputs[0], axes)],
                  training=True, axes=list(axes))
    return [grad] + [None] * (len(node.inputs) - 1)


@rule("Softmax", "LogSoftmax")
def softmax(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    rank = len(t.shape(node.inputs[0]))
    axis = int(node.attr("axis", -1 if t.graph.opset >= SINGLE_AXIS_OPSET else 1)) % rank
    if t.graph.opset < SINGLE_AXIS_OPSET and axis != rank - 1:
        raise ModelError(f"{t.graph.source}: {node.where()}: a {node.op} over axes {axis}.. (opset "
                         f"{t.graph.opset}) has no gradient rule; over the last axis it has")
    return [t.node(f"{node.op}Grad", [output_grad(node, dys), node.outputs[0]], training=True, axes=[axis])]

"""Gradient rules of the convolution family: Conv, MaxPool, AveragePool, their global forms, and LRN.

Conv's input and weight gradients are the training ops ConvGradData and ConvGradFilter (compiler/ops/train/conv.py),
its bias gradient dy summed over N and the spatial axes; the image a first layer reads gets no gradient (no rule
computes an input gradient that `wants` does not ask for). A pool's and LRN's gradient ops take the forward node's
attributes as they are (a MaxPool's Indices output never gets here: shape inference refuses it, compiler/ops/pool.py).
GlobalMaxPool is a MaxPool whose window is the whole map (ties to the first maximum, as PyTorch's adaptive_max_pool
gives them), GlobalAveragePool spreads dy / (spatial size) over the map.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.graph import Node
from compiler.train.autodiff import Grads, Tape, output_grad, rule


@rule("Conv")
def conv(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    x, w = node.inputs[:2]
    dy = output_grad(node, dys)
    data = t.node("ConvGradData", [dy, w], training=True, shape=list(t.shape(x)), **node.attrs) if wants[0] else None
    weight = (t.node("ConvGradFilter", [x, dy], training=True, shape=list(t.shape(w)), **node.attrs) if wants[1]
              else None)
    if len(node.inputs) < 3:
        return [data, weight]
    spread = [0] + list(range(2, len(t.shape(dy))))      # N and the spatial axes
    return [data, weight, t.reduce_sum(dy, spread) if wants[2] else None]


@rule("MaxPool")
def max_pool(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return [t.node("MaxPoolGrad", [output_grad(node, dys), node.inputs[0]], training=True, **node.attrs)]


@rule("AveragePool")
def average_pool(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return [t.node("AveragePoolGrad", [output_grad(node, dys)], training=True, shape=list(t.shape(node.inputs[0])),
                   **node.attrs)]


@rule("GlobalMaxPool")
def global_max_pool(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    spatial = list(t.shape(node.inputs[0])[2:])
    return [t.node("MaxPoolGrad", [output_grad(node, dys), node.inputs[0]], training=True, kernel_shape=spatial)]


@rule("GlobalAveragePool")
def global_average_pool(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    shape = t.shape(node.inputs[0])
    dy = output_grad(node, dys)
    spread = t.node("Expand", [dy, t.ints(shape)])
    return [t.node("Mul", [spread, t.const(np.asarray(1.0 / math.prod(shape[2:])), t.dtype(dy), "mean")])]


@rule("LRN")
def lrn(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return [t.node("LRNGrad", [output_grad(node, dys), node.inputs[0]], training=True, **node.attrs)]

"""Gradient rules of ops that move data without arithmetic: the gradient moves back the way the data came.

Reshape-like ops reshape it back, Transpose applies the inverse permutation, Expand sums over what it stretched,
Concat splits it, Slice and Gather put it back where they took from (zeros elsewhere, repeated indices added).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from compiler.ops.base import normalize_axis
from compiler.ops.slice import slice_bounds
from compiler.graph import Node
from compiler.train.autodiff import Grads, Tape, output_grad, rule


@rule("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def reshape(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return [t.reshape(output_grad(node, dys), t.shape(node.inputs[0]))] + [None] * (len(node.inputs) - 1)


@rule("Transpose")
def transpose(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    rank = len(t.shape(node.inputs[0]))
    perm = [int(p) for p in node.attr("perm", list(range(rank))[::-1])]
    return [t.node("Transpose", [output_grad(node, dys)], perm=[int(i) for i in np.argsort(perm)])]


@rule("Expand")
def expand(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return [t.sum_to(output_grad(node, dys), t.shape(node.inputs[0])), None]


@rule("Concat")
def concat(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    dy = output_grad(node, dys)
    axis = normalize_axis(node, int(node.attr("axis")), len(t.shape(dy)))
    sizes = [t.shape(name)[axis] for name in node.inputs]
    if t.graph.opset >= 13:
        split = t.node("Split", [dy, t.ints(sizes)], outputs=len(sizes), axis=axis)
    else:
        split = t.node("Split", [dy], outputs=len(sizes), axis=axis, split=sizes)
    parts = split if isinstance(split, tuple) else (split,)
    return [part if want else None for part, want in zip(parts, wants)]


@rule("Slice")
def slice_(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    starts, ends, axes, steps = slice_bounds(node, lambda i: t.graph.value(node.inputs[i])
                                        if len(node.inputs) > i and node.inputs[i] else None)
    listed = [None if v is None else [int(x) for x in np.asarray(v).reshape(-1)] for v in (starts, ends, axes, steps)]
    attrs: dict[str, Any] = {k: v for k, v in zip(("starts", "ends", "axes", "steps"), listed) if v is not None}
    grad = t.node("SliceGrad", [output_grad(node, dys)], training=True, shape=list(t.shape(node.inputs[0])),
                  **attrs)
    return [grad] + [None] * (len(node.inputs) - 1)


@rule("Gather")
def gather(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    grad = t.node("GatherGrad", [output_grad(node, dys), node.inputs[1]], training=True,
                  shape=list(t.shape(node.inputs[0])), axis=int(node.attr("axis", 0)))
    return [grad, None]

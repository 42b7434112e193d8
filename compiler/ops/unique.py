"""Unique: the distinct elements (or slices along `axis`), sorted or in order of first appearance, with the
index of each one's first appearance, the inverse map (input position -> output row) and the counts.

How many there are depends on the values: a constant input folds at import; otherwise Unique evaluates but
cannot be simulated. Invariant: the stand-in shapes are the largest possible (every element distinct).
"""
from __future__ import annotations

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, fail, normalize_axis, out, register, require
from compiler.ops.runtime import forget_stand_in, known_input, require_static, stand_in


def unique(node: Node, x: np.ndarray) -> list[np.ndarray]:
    axis = node.attr("axis")
    if axis is None:
        x, axis = x.reshape(-1), 0
    else:
        axis = normalize_axis(node, int(axis), x.ndim)
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                               axis=axis)
    inverse = inverse.reshape(-1)
    if not int(node.attr("sorted", 1)):
        # first-appearance order: rank the sorted rows by where each first appears
        by_first = np.argsort(first, kind="stable")
        rank = np.empty_like(by_first)
        rank[by_first] = np.arange(by_first.size)
        values, first, counts, inverse = np.take(values, by_first, axis=axis), first[by_first], \
            counts[by_first], rank[inverse]
    return [values] + [np.asarray(a, dtype=np.int64) for a in (first, inverse, counts)]


@register("Unique")
class Unique(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        axis = node.attr("axis")
        shape: tuple[int, ...]
        if axis is None:
            shape, axis = (x.elements,), 0
        else:
            shape, axis = x.shape, normalize_axis(node, int(axis), len(x.shape))
        forget_stand_in(node)
        given = known_input(node, graph, 0)
        if given is not None:
            shapes = [r.shape for r in unique(node, given)]
        else:
            most = stand_in(node, shape, f"how many distinct values {node.inputs[0]!r} holds")[axis]
            shapes = [shape, (most,), (most,), (most,)]
        dtypes = [x.dtype, DType.int64, DType.int64, DType.int64]
        return [out(node, s, d, i) for i, (name, s, d) in enumerate(zip(node.outputs, shapes, dtypes)) if name]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return unique(node, np.asarray(args[0]))[:len(node.outputs)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        require_static(node)
        raise fail(node, "a constant input too large to fold at import: Unique is evaluated (accelsim eval), "
                         "not simulated")

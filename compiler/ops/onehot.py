"""OneHot: a new axis of `depth` classes, `on` where the class is the index and `off` elsewhere (values = [off,
on]). Indices in [-depth, depth) count negatives from the end; others give a row of `off`. One Map: a compare
and a select per output element.

Invariant: output shape is the indices' shape with the compile-time depth inserted at `axis` (in [-r-1, r]);
dtype is values'.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, const_input, fail, given, map_reference, out, register, require


def depth_of(node: Node, value: ArrayLike) -> int:
    value = np.asarray(value).reshape(-1)
    if value.size != 1 or value[0] < 1:
        raise fail(node, f"depth must be one number >= 1, got {value.tolist()}")
    return int(value[0])


def insert_axis(node: Node, rank: int) -> int:
    axis = int(node.attr("axis", -1))
    if not -rank - 1 <= axis <= rank:
        raise fail(node, f"axis {axis} is out of range for indices of rank {rank} (allowed {-rank - 1} to {rank})")
    return axis % (rank + 1)


def one_hot(node: Node, indices: ArrayLike, depth: ArrayLike, values: ArrayLike) -> np.ndarray:
    indices = np.asarray(indices)
    depth = depth_of(node, depth)
    values = np.asarray(values).reshape(-1)
    axis = insert_axis(node, indices.ndim)
    index = indices.astype(np.int64)   # float indices truncate toward zero, as onnxruntime casts them
    index = np.where(index < 0, index + depth, index)
    classes = np.arange(depth).reshape((depth,) + (1,) * (indices.ndim - axis))
    encoded: np.ndarray = np.where(np.expand_dims(index, axis) == classes, values[1], values[0])
    return encoded


@register("OneHot")
class OneHot(OpDef):
    value_inputs = (1,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        indices, depth, values = require(node, ins, 3)
        if depth.elements != 1:
            raise fail(node, f"depth ({depth.name!r}) must hold one value, got shape {list(depth.shape)}")
        if values.shape != (2,):
            raise fail(node, f"values ({values.name!r}) must be [off, on], got shape {list(values.shape)}")
        axis = insert_axis(node, len(indices.shape))
        size = depth_of(node, const_input(node, graph, 1, "depth"))
        return [out(node, indices.shape[:axis] + (size,) + indices.shape[axis:], values.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [one_hot(node, *given(node, args, 3))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return map_reference(self, node, graph, ops_per_element=2)

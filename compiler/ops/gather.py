"""Gather: pick entries of `data` along `axis` by `indices` (negative counts from the end), e.g. embedding
lookups. One Move that reads only the gathered rows; output shape data[:axis] + indices + data[axis+1:].
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, fail, given, move_op, normalize_axis, out, register, require


def checked_indices(node: Node, indices: ArrayLike, axis: int, dim: int) -> np.ndarray:
    """Indices in [0, dim): negatives wrapped once; anything else out of range is the model's error."""
    indices = np.asarray(indices).astype(np.int64)
    bad = indices[(indices < -dim) | (indices >= dim)]
    if bad.size:
        raise fail(node, f"index {int(bad.reshape(-1)[0])} is out of range for axis {axis} of size {dim} "
                         f"(allowed {-dim} to {dim - 1})")
    wrapped: np.ndarray = np.where(indices < 0, indices + dim, indices)
    return wrapped


def gather(node: Node, data: np.ndarray, indices: ArrayLike) -> np.ndarray:
    axis = normalize_axis(node, int(node.attr("axis", 0)), data.ndim)
    return np.take(data, checked_indices(node, indices, axis, data.shape[axis]), axis=axis)


@register("Gather")
class Gather(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        data, indices = require(node, ins, 2)
        if indices.dtype not in (DType.int32, DType.int64):
            raise fail(node, f"indices {indices.name!r} must be int32 or int64, got {indices.dtype.value}")
        if not data.shape:
            raise fail(node, f"data {data.name!r} is a scalar; Gather needs rank >= 1")
        axis = normalize_axis(node, int(node.attr("axis", 0)), len(data.shape))
        known = graph.value(node.inputs[1])
        if known is not None:   # constant indices (shape arithmetic, fixed positions): check them now
            checked_indices(node, known, axis, data.shape[axis])
        return [out(node, data.shape[:axis] + indices.shape + data.shape[axis + 1:], data.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        data, indices = given(node, args, 2)
        return [gather(node, np.asarray(data), indices)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return [move_op(node, graph, lambda data, indices: gather(node, np.asarray(data), indices))]

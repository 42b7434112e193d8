"""The gradients of ops that pick parts of a tensor: SliceGrad puts dy back where Slice took it from (zeros
elsewhere), GatherGrad adds each gathered row's gradient into its index (an embedding table's gradient).

Invariant: the output has the forward input's shape (attribute `shape`); GatherGrad adds repeated indices up.
"""
from __future__ import annotations

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import TRAINING_DOMAIN, OpDef, fail, given, map_op, normalize_axis, out, register, require
from compiler.ops.slice import slices


def _shape(node: Node) -> tuple[int, ...]:
    return tuple(int(d) for d in node.attr("shape", ()))


@register("SliceGrad", domain=TRAINING_DOMAIN)
class SliceGrad(OpDef):
    """dy and the Slice's bounds as attributes (starts, ends, axes, steps) -> dx of `shape`."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (dy,) = require(node, ins, 1)
        kept = np.zeros(_shape(node), bool)[self._where(node)].shape
        if kept != dy.shape:
            raise fail(node, f"the slice keeps {list(kept)} of {list(_shape(node))}, but dy is {list(dy.shape)}")
        return [out(node, _shape(node), dy.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        (dy,) = given(node, args, 1)
        dx = np.zeros(_shape(node), dtype=dy.dtype)
        dx[self._where(node)] = dy
        return [dx]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        # a Map, not a Move: the zeros around the slice come from no source element (a chunk cuts dy and dx alike
        # along every axis the slice keeps whole)
        return map_op(node, graph, lambda dy: self.reference(node, [dy])[0], 0)

    @staticmethod
    def _where(node: Node) -> tuple[slice, ...]:
        return slices(node, _shape(node), node.attr("starts"), node.attr("ends"), node.attr("axes"), node.attr("steps"))


@register("GatherGrad", domain=TRAINING_DOMAIN)
class GatherGrad(OpDef):
    """(dy, indices), attributes shape and axis -> d data: zeros, then every dy row added at its index."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        shape, (dy, indices) = _shape(node), require(node, ins, 2)
        axis = normalize_axis(node, int(node.attr("axis", 0)), len(shape))
        if indices.dtype not in (DType.int32, DType.int64):
            raise fail(node, f"indices must be int32 or int64, got {indices.dtype.value}")
        if dy.shape != shape[:axis] + indices.shape + shape[axis + 1:]:
            raise fail(node, f"dy {list(dy.shape)} is not what Gather of {list(indices.shape)} indices from "
                             f"{list(shape)} gives")
        return [out(node, shape, dy.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        dy, indices = np.asarray(args[0]), np.asarray(args[1]).astype(np.int64)
        shape = _shape(node)
        axis = int(node.attr("axis", 0)) % len(shape)
        indices = np.where(indices < 0, indices + shape[axis], indices)
        work = np.zeros(shape, dtype=np.float64 if dy.dtype == np.float64 else np.float32)
        moved = np.moveaxis(work, axis, 0)
        rows = np.moveaxis(dy.reshape(shape[:axis] + (indices.size,) + shape[axis + 1:]), axis, 0)
        np.add.at(moved, indices.reshape(-1), rows)
        return [work.astype(dy.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        # one add per element of the table: the zero fill and the scattered adds land in it
        return map_op(node, graph, lambda dy, indices: self.reference(node, [dy, indices])[0], 1)

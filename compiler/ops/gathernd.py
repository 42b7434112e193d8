"""GatherElements (pick data[..., indices[i], ...] along one axis, output shaped like indices) and GatherND (pick
slices of data by index tuples, with leading batch dims). Each lowers to one Move that reads what it gathers.

Invariant: indices are int32/int64 and wrap once when negative; any index out of range is the model's error.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, fail, given, move_op, normalize_axis, out, register, require
from compiler.ops.gather import checked_indices

INDEX_TYPES = (DType.int32, DType.int64)


def check_index_dtype(node: Node, indices: Tensor) -> None:
    if indices.dtype not in INDEX_TYPES:
        raise fail(node, f"indices {indices.name!r} must be int32 or int64, got {indices.dtype.value}")


def element_index(node: Node, shape: tuple[int, ...], indices: ArrayLike, axis: int) -> tuple[np.ndarray, ...]:
    """The full index tuple of an element-wise gather or scatter along `axis`: indices give the axis position,
    every other axis is the element's own position (so indices may be smaller than data there)."""
    positions = checked_indices(node, indices, axis, shape[axis])
    grid: list[np.ndarray] = list(np.indices(positions.shape, sparse=True))
    grid[axis] = positions
    return tuple(grid)


def element_shapes(node: Node, data: Tensor, indices: Tensor) -> int:
    """The axis of GatherElements/ScatterElements, after checking that indices fit inside data."""
    check_index_dtype(node, indices)
    rank = len(data.shape)
    if len(indices.shape) != rank or rank == 0:
        raise fail(node, f"indices {indices.name!r} have shape {list(indices.shape)}; they need the rank of "
                         f"data {list(data.shape)} (at least 1)")
    axis = normalize_axis(node, int(node.attr("axis", 0)), rank)
    for i, (d, n) in enumerate(zip(data.shape, indices.shape)):
        if i != axis and n > d:
            raise fail(node, f"indices {list(indices.shape)} exceed data {list(data.shape)} on axis {i}")
    return axis


def gather_elements(node: Node, data: np.ndarray, indices: ArrayLike) -> np.ndarray:
    axis = normalize_axis(node, int(node.attr("axis", 0)), data.ndim)
    picked: np.ndarray = data[element_index(node, data.shape, np.asarray(indices), axis)]
    return picked


@register("GatherElements")
class GatherElements(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        data, indices = require(node, ins, 2)
        axis = element_shapes(node, data, indices)
        known = graph.value(node.inputs[1])
        if known is not None:   # constant indices: check them now
            checked_indices(node, known, axis, data.shape[axis])
        return [out(node, indices.shape, data.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        data, indices = given(node, args, 2)
        return [gather_elements(node, np.asarray(data), indices)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return [move_op(node, graph, lambda data, indices: gather_elements(node, np.asarray(data), indices))]


def nd_shapes(node: Node, data: tuple[int, ...], indices: tuple[int, ...], batch: int) -> tuple[int, ...]:
    """The shape GatherND picks per index tuple, data[batch + depth:], after checking the index shape."""
    if not 0 <= batch < min(len(data), max(len(indices), 1)):
        raise fail(node, f"batch_dims={batch} must be below the ranks of data ({len(data)}) and indices "
                         f"({len(indices)})")
    if not indices:
        raise fail(node, "indices must have rank >= 1 (the last axis holds the index tuples)")
    depth = indices[-1]
    if not 1 <= depth <= len(data) - batch:
        raise fail(node, f"the last axis of indices {list(indices)} holds {depth} coordinates; with "
                         f"batch_dims={batch} data {list(data)} takes 1 to {len(data) - batch}")
    if data[:batch] != indices[:batch]:
        raise fail(node, f"the first {batch} (batch) dims of data {list(data)} and indices {list(indices)} differ")
    return data[batch + depth:]


def nd_index(node: Node, shape: tuple[int, ...], indices: ArrayLike, batch: int) -> tuple[np.ndarray, ...]:
    """Index arrays into data reshaped to (batches, *shape[batch:]) for every index tuple: (batches, tuples)."""
    wide = np.asarray(indices).astype(np.int64)
    depth = wide.shape[-1]
    batches = math.prod(shape[:batch])
    tuples = wide.reshape(batches, -1, depth)
    columns = [checked_indices(node, tuples[..., j], batch + j, shape[batch + j]) for j in range(depth)]
    return (np.arange(batches)[:, None], *columns)


def gather_nd(node: Node, data: np.ndarray, indices: ArrayLike) -> np.ndarray:
    batch = int(node.attr("batch_dims", 0))
    index_array = np.asarray(indices)
    rest = nd_shapes(node, data.shape, index_array.shape, batch)
    flat = data.reshape((math.prod(data.shape[:batch]),) + data.shape[batch:])
    picked: np.ndarray = flat[nd_index(node, data.shape, index_array, batch)]
    return picked.reshape(index_array.shape[:-1] + rest)


@register("GatherND")
class GatherND(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        data, indices = require(node, ins, 2)
        check_index_dtype(node, indices)
        rest = nd_shapes(node, data.shape, indices.shape, int(node.attr("batch_dims", 0)))
        known = graph.value(node.inputs[1])
        if known is not None:   # constant indices: check them now
            nd_index(node, data.shape, known, int(node.attr("batch_dims", 0)))
        return [out(node, indices.shape[:-1] + rest, data.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        data, indices = given(node, args, 2)
        return [gather_nd(node, np.asarray(data), indices)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return [move_op(node, graph, lambda data, indices: gather_nd(node, np.asarray(data), indices))]

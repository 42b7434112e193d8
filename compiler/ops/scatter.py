"""ScatterElements (and its opset-9 name Scatter) and ScatterND: a copy of data with updates written at indices,
or combined into it (reduction add, mul, max, min). Indices wrap once when negative; out of range is an error.
TensorScatter (a KV-cache write): per batch entry, the update's steps written along `axis` from write_indices[b],
wrapping around the cache in circular mode.

Lowering: a plain scatter is one Move (the copy of data, the updates written over it); a reducing one is one Map
whose work is one operation per update, spread over the output's elements. TensorScatter is one in-place Move
(compiler.ir.Move.in_place): the cache is aliased, and only the update's bytes are read and written.
Invariant: the output has data's shape and dtype; updates have data's dtype and the shape indices imply.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, fail, given, map_op, move_op, normalize_axis, out, register, require
from compiler.ops.gathernd import check_index_dtype, element_index, element_shapes, nd_index, nd_shapes

# reduction -> the numpy ufunc that combines an update into the element it lands on (unbuffered: repeats count)
REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def reduction(node: Node) -> str:
    name = str(node.attr("reduction", "none"))
    if name != "none" and name not in REDUCTIONS:
        raise fail(node, f"reduction={name!r} is not supported (allowed: none, {', '.join(REDUCTIONS)})")
    return name


def write(data: np.ndarray, index: tuple[Any, ...], updates: np.ndarray, how: str) -> np.ndarray:
    result = np.array(data, copy=True)
    if how == "none":
        result[index] = updates   # repeated indices: the last update wins, as in onnxruntime
    else:
        REDUCTIONS[how].at(result, index, updates)
    return result


def scatter_elements(node: Node, data: np.ndarray, indices: ArrayLike, updates: ArrayLike) -> np.ndarray:
    axis = int(node.attr("axis", 0)) % data.ndim
    return write(data, element_index(node, data.shape, np.asarray(indices), axis), np.asarray(updates),
                 reduction(node))


def scatter_nd(node: Node, data: np.ndarray, indices: ArrayLike, updates: ArrayLike) -> np.ndarray:
    index_array = np.asarray(indices)
    depth = index_array.shape[-1]
    flat = np.asarray(updates).reshape((-1,) + data.shape[depth:])
    columns = nd_index(node, data.shape, index_array, 0)[1:]   # no batch dims: one batch of every index tuple
    return write(data, tuple(c[0] for c in columns), flat, reduction(node))


def lower_scatter(node: Node, graph: Graph, fn: Callable[..., np.ndarray]) -> list[IROp]:
    if reduction(node) == "none":
        return [move_op(node, graph, fn)]
    # one combine per update; a Map counts work per output element, so spread the updates over the output
    updates = graph.tensor(node.inputs[2]).elements
    per_element = max(1, math.ceil(updates / max(1, graph.tensor(node.outputs[0]).elements)))
    return map_op(node, graph, fn, per_element)


@register("ScatterElements", "Scatter")
class ScatterElements(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        data, indices, updates = require(node, ins, 3)
        reduction(node)
        axis = element_shapes(node, data, indices)
        known = graph.value(node.inputs[1])
        if known is not None:   # constant indices: check them now
            element_index(node, data.shape, known, axis)
        if updates.shape != indices.shape or updates.dtype != data.dtype:
            raise fail(node, f"updates {updates.name!r} ({updates.dtype.value} {list(updates.shape)}) must have "
                             f"the shape of indices {list(indices.shape)} and the dtype of data ({data.dtype.value})")
        return [out(node, data.shape, data.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        data, indices, updates = given(node, args, 3)
        return [scatter_elements(node, np.asarray(data), indices, updates)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return lower_scatter(node, graph, lambda d, i, u: scatter_elements(node, np.asarray(d), i, u))


@register("ScatterND")
class ScatterND(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        data, indices, updates = require(node, ins, 3)
        reduction(node)
        check_index_dtype(node, indices)
        rest = nd_shapes(node, data.shape, indices.shape, 0)
        known = graph.value(node.inputs[1])
        if known is not None:   # constant indices: check them now
            nd_index(node, data.shape, known, 0)
        want = indices.shape[:-1] + rest
        if updates.shape != want or updates.dtype != data.dtype:
            raise fail(node, f"updates {updates.name!r} ({updates.dtype.value} {list(updates.shape)}) must be "
                             f"{data.dtype.value} {list(want)}: indices {list(indices.shape)}[:-1] followed by "
                             f"data {list(data.shape)}[{indices.shape[-1]}:]")
        return [out(node, data.shape, data.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        data, indices, updates = given(node, args, 3)
        return [scatter_nd(node, np.asarray(data), indices, updates)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return lower_scatter(node, graph, lambda d, i, u: scatter_nd(node, np.asarray(d), i, u))


def cache_positions(node: Node, cache: tuple[int, ...], update: tuple[int, ...], starts: ArrayLike | None
                    ) -> np.ndarray:
    """Cache positions [batch, step] each update step goes to, checked against the cache's length."""
    axis = int(node.attr("axis", -2)) % len(cache)
    length, steps = cache[axis], update[axis]
    offsets = np.zeros(cache[0], np.int64) if starts is None else np.asarray(starts).astype(np.int64).reshape(-1)
    if offsets.size != cache[0] or np.any(offsets < 0):
        raise fail(node, f"write_indices {offsets.tolist()} must give one start >= 0 for each of the {cache[0]} "
                         f"batch entries")
    positions: np.ndarray = offsets[:, None] + np.arange(steps)[None, :]
    if str(node.attr("mode", "linear")) == "circular":
        wrapped: np.ndarray = positions % length
        return wrapped
    if positions.size and positions.max() >= length:
        raise fail(node, f"write_indices {offsets.tolist()} plus {steps} steps run past the cache length {length} "
                         f"(mode linear; circular wraps)")
    return positions


def tensor_scatter(node: Node, cache: np.ndarray, update: np.ndarray, starts: ArrayLike | None) -> np.ndarray:
    axis = int(node.attr("axis", -2)) % cache.ndim
    positions = cache_positions(node, cache.shape, update.shape, starts)
    grid: list[np.ndarray] = list(np.indices(update.shape, sparse=True))
    grid[axis] = positions.reshape((cache.shape[0],) + (1,) * (axis - 1) + (update.shape[axis],)
                                   + (1,) * (cache.ndim - axis - 1))
    result = np.array(cache, copy=True)
    result[tuple(grid)] = update
    return result


@register("TensorScatter")
class TensorScatter(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        cache, update = require(node, ins, 2, 3)
        mode = str(node.attr("mode", "linear"))
        if mode not in ("linear", "circular"):
            raise fail(node, f"mode={mode!r} is not supported (allowed: linear, circular)")
        rank = len(cache.shape)
        axis = normalize_axis(node, int(node.attr("axis", -2)), rank)
        if axis == 0:
            raise fail(node, f"axis {node.attr('axis', -2)} is the batch axis; the sequence axis must come after it")
        fits = len(update.shape) == rank and update.shape[axis] <= cache.shape[axis] and all(
            u == c for i, (u, c) in enumerate(zip(update.shape, cache.shape)) if i != axis)
        if not fits or update.dtype != cache.dtype:
            raise fail(node, f"update {update.name!r} ({update.dtype.value} {list(update.shape)}) must match the "
                             f"cache ({cache.dtype.value} {list(cache.shape)}) except on axis {axis}, where it "
                             f"may be shorter")
        known = graph.value(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
        if known is not None:
            cache_positions(node, cache.shape, update.shape, known)
        return [out(node, cache.shape, cache.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        starts = args[2] if len(args) > 2 else None
        return [tensor_scatter(node, np.asarray(args[0]), np.asarray(args[1]), starts)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        # in place, as runtimes run it (onnxruntime aliases past and present; vLLM and TensorRT-LLM append to the
        # cache): the update's rows are read and written, the rest of the cache never moves
        op = move_op(node, graph, lambda cache, update, starts=None:
                     tensor_scatter(node, np.asarray(cache), np.asarray(update), starts))
        return [replace(op, in_place=True)]

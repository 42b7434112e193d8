"""Slice (starts/ends/axes/steps, clamped as ONNX says) and Split (sizes, or equal parts): one Move per output.

Invariant: the slicing bounds are compile-time constants; a Move reads only the bytes its output keeps.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, const_input, fail, move_op, normalize_axis, operand, out, register, require


def _ints(value: object) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def slices(node: Node, shape: tuple[int, ...], starts: Any, ends: Any, axes: Any, steps: Any) -> tuple[slice, ...]:
    """Python slices for ONNX Slice bounds: negatives count from the end, then clamp.

    Positive step: start and end clamp to [0, dim]. Negative step: start to [0, dim-1], end to
    [-1, dim-1], where -1 means "past the front" (Python spells that None).
    e.g. dim 5, start -1, end -100, step -2 -> start 4, end -1 -> elements 4, 2, 0.
    """
    starts, ends = _ints(starts), _ints(ends)
    rank = len(shape)
    axes = list(range(len(starts))) if axes is None else _ints(axes)
    steps = [1] * len(starts) if steps is None else _ints(steps)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise fail(node, f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must have one length")
    axes = [normalize_axis(node, a, rank) for a in axes]
    if len(set(axes)) != len(axes):
        raise fail(node, f"axes {axes} repeat an axis")
    result = [slice(None)] * rank
    for start, end, axis, step in zip(starts, ends, axes, steps):
        dim = shape[axis]
        if step == 0:
            raise fail(node, f"step 0 on axis {axis} is not allowed")
        start += dim if start < 0 else 0
        end += dim if end < 0 else 0
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        result[axis] = slice(start, None if end < 0 else end, step)
    return tuple(result)


def slice_bounds(node: Node, value: Callable[[int], Any]) -> tuple[Any, Any, Any, Any]:
    """A Slice node's (starts, ends, axes, steps): attributes before opset 10, inputs 1-4 from 10 (`value(i)` or
    None), for its shape rule, its reference and its gradient alike."""
    if "starts" in node.attrs:
        return node.attrs["starts"], node.attrs["ends"], node.attrs.get("axes"), None
    return value(1), value(2), value(3), value(4)


@register("Slice")
class Slice(OpDef):
    value_inputs = (1, 2, 3, 4)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        legacy = "starts" in node.attrs
        x = require(node, ins, 1 if legacy else 3, 1 if legacy else 5)[0]
        if legacy and "ends" not in node.attrs:
            raise fail(node, "attribute 'ends' is missing")

        def value(i: int) -> np.ndarray | None:
            names = ("data", "starts", "ends", "axes", "steps")
            present = i < len(node.inputs) and node.inputs[i]
            return const_input(node, graph, i, names[i]) if present else None
        index = slices(node, x.shape, *slice_bounds(node, value))
        shape = [len(range(d)[s]) for d, s in zip(x.shape, index)]  # Python counts what a slice keeps
        return [out(node, shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        return [x[slices(node, x.shape, *slice_bounds(node, lambda i: args[i] if i < len(args) else None))]]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        shape = graph.tensor(node.inputs[0]).shape
        index = slices(node, shape, *slice_bounds(node, lambda i: graph.value(node.inputs[i])
                                            if i < len(node.inputs) and node.inputs[i] else None))
        data = (operand(graph, node.inputs[0]),)
        return [move_op(node, graph, lambda x: np.asarray(x)[index].copy(), inputs=data)]


def split_sizes(node: Node, dim: int, given: object, opset: int | None) -> list[int]:
    """Sizes along the axis: given, or len(outputs) equal parts (from opset 18 the last may be smaller)."""
    parts = len(node.outputs)
    if given is not None:
        sizes = _ints(given)
        if len(sizes) != parts or sum(sizes) != dim or min(sizes, default=0) < 0:
            raise fail(node, f"split {sizes} must give {parts} sizes >= 0 summing to the axis size {dim}")
        return sizes
    wanted = node.attr("num_outputs")
    if wanted is not None and int(wanted) != parts:
        raise fail(node, f"num_outputs={wanted} but the node has {parts} outputs")
    if dim % parts == 0:
        return [dim // parts] * parts
    chunk = math.ceil(dim / parts)
    if (opset is not None and opset < 18) or chunk * (parts - 1) >= dim:
        raise fail(node, f"axis size {dim} does not split into {parts} parts; give split sizes")
    return [chunk] * (parts - 1) + [dim - chunk * (parts - 1)]


@register("Split")
class Split(OpDef):
    value_inputs = (1,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x = require(node, ins, 1, 2)[0]
        shape = x.shape
        axis = normalize_axis(node, int(node.attr("axis", 0)), len(shape))
        sizes = split_sizes(node, shape[axis], self._given(node, lambda: const_input(node, graph, 1, "split")),
                            graph.opset)
        outs: list[Tensor] = []
        for i, (name, size) in enumerate(zip(node.outputs, sizes)):
            if name:
                outs.append(out(node, shape[:axis] + (size,) + shape[axis + 1:], x.dtype, i))
        return outs

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        axis = int(node.attr("axis", 0)) % x.ndim
        sizes = split_sizes(node, x.shape[axis], self._given(node, lambda: args[1]), None)
        return np.split(x, np.cumsum(sizes)[:-1], axis=axis)

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        x = graph.tensor(node.inputs[0])
        axis = int(node.attr("axis", 0)) % len(x.shape)
        sizes = split_sizes(node, x.shape[axis], self._given(node, lambda: graph.value(node.inputs[1])), None)
        data = (operand(graph, node.inputs[0]),)
        ops: list[IROp] = []
        for i, (name, start) in enumerate(zip(node.outputs, np.cumsum([0] + sizes[:-1]))):
            if name:
                index = (slice(None),) * axis + (slice(int(start), int(start) + sizes[i]),)
                ops.append(move_op(node, graph, lambda a, index=index: np.asarray(a)[index].copy(),
                                   index=i, inputs=data))
        return ops

    @staticmethod
    def _given(node: Node, second_input: Callable[[], object]) -> object:
        if "split" in node.attrs:
            return node.attrs["split"]
        return second_input() if len(node.inputs) > 1 and node.inputs[1] else None

"""NonZero (the int64 coordinates of the non-zero elements, one row per axis) and Compress (the slices along an
axis, or the elements of the flattened input, where a bool condition is true). How many come out depends on the
values: with a constant input (condition) they fold or lower to a Move, otherwise they evaluate but cannot be
simulated.

Invariant: the stand-in shape of a run-time result is its largest possible one.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, const_input, fail, given, move_op, normalize_axis, operand, out, register, require
from compiler.ops.runtime import forget_stand_in, known_input, require_static, stand_in


def nonzero(x: np.ndarray) -> np.ndarray:
    if x.ndim == 0:   # numpy treats a scalar as one element of a 1-D array; ONNX has no row for it
        return np.zeros((0, int(bool(x))), dtype=np.int64)
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


@register("NonZero")
class NonZero(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        forget_stand_in(node)
        given = known_input(node, graph, 0)
        if given is not None:
            return [out(node, nonzero(given).shape, DType.int64)]
        why = f"how many elements of {node.inputs[0]!r} are non-zero"
        return [out(node, stand_in(node, (len(x.shape), x.elements), why), DType.int64)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [nonzero(np.asarray(args[0]))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        require_static(node)
        raise fail(node, "a constant input too large to fold at import: NonZero is evaluated (accelsim eval), "
                         "not simulated")


def compress(node: Node, x: np.ndarray, condition: ArrayLike) -> np.ndarray:
    condition = np.asarray(condition).reshape(-1).astype(bool)
    axis = node.attr("axis")
    if axis is None:
        x = x.reshape(-1)
        axis = 0
    else:
        axis = normalize_axis(node, int(axis), x.ndim)
    if condition.size > x.shape[axis]:
        raise fail(node, f"condition has {condition.size} entries, more than the {x.shape[axis]} it selects from")
    return np.compress(condition, x, axis=axis)


@register("Compress")
class Compress(OpDef):
    value_inputs = (1,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, condition = require(node, ins, 2)
        if condition.dtype != DType.bool or len(condition.shape) != 1:
            raise fail(node, f"condition ({condition.name!r}) must be a 1-D bool tensor, got "
                             f"{condition.dtype.value} {list(condition.shape)}")
        axis = node.attr("axis")
        shape = (x.elements,) if axis is None else x.shape
        axis = 0 if axis is None else normalize_axis(node, int(axis), len(x.shape))
        if condition.shape[0] > shape[axis]:
            raise fail(node, f"condition has {condition.shape[0]} entries, more than the {shape[axis]} along "
                             f"axis {axis} of {list(shape)}")
        forget_stand_in(node)
        given = known_input(node, graph, 1)
        if given is None:
            shape = stand_in(node, shape, f"how many entries of condition {node.inputs[1]!r} are true")
        else:
            kept = int(np.count_nonzero(given))
            shape = shape[:axis] + (kept,) + shape[axis + 1:]
        return [out(node, shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, condition = given(node, args, 2)
        return [compress(node, np.asarray(x), condition)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        require_static(node)
        condition = const_input(node, graph, 1, "condition")
        data = (operand(graph, node.inputs[0]),)
        return [move_op(node, graph, lambda x: compress(node, np.asarray(x), condition), inputs=data)]

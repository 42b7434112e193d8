"""CenterCropPad: crop or zero-pad each listed axis to a target size, centred (an odd difference leaves the extra
element at the end). One Move that writes the output.

Invariant: the target sizes are a compile-time 1-D int list, one per listed axis (all axes when none are listed).
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, const_input, fail, given, move_op, normalize_axis, operand, out, register, require


def targets(node: Node, shape: tuple[int, ...], sizes: ArrayLike) -> dict[int, int]:
    """Axis -> target size, checked."""
    sizes = [int(s) for s in np.asarray(sizes).reshape(-1)]
    listed = node.attr("axes")
    axes = list(range(len(shape))) if listed is None else [normalize_axis(node, int(a), len(shape)) for a in listed]
    if len(set(axes)) != len(axes):
        raise fail(node, f"axes {list(listed)} name an axis twice")
    if len(sizes) != len(axes) or min(sizes, default=0) < 0:
        raise fail(node, f"shape {sizes} must give one size >= 0 for each of the {len(axes)} axes {axes}")
    return dict(zip(axes, sizes))


def center_crop_pad(node: Node, x: np.ndarray, sizes: ArrayLike) -> np.ndarray:
    wanted = targets(node, x.shape, sizes)
    crop, place = [slice(None)] * x.ndim, [slice(None)] * x.ndim
    shape = list(x.shape)
    for axis, size in wanted.items():
        dim, shape[axis] = x.shape[axis], size
        begin = abs(dim - size) // 2
        if size < dim:
            crop[axis] = slice(begin, begin + size)
        elif size > dim:
            place[axis] = slice(begin, begin + dim)
    result = np.zeros(shape, dtype=x.dtype)
    result[tuple(place)] = x[tuple(crop)]
    return result


@register("CenterCropPad")
class CenterCropPad(OpDef):
    value_inputs = (1,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, shape_input = require(node, ins, 2)
        if shape_input.dtype not in (DType.int32, DType.int64):
            raise fail(node, f"shape ({shape_input.name!r}) must be int32 or int64, got {shape_input.dtype.value}")
        wanted = targets(node, x.shape, const_input(node, graph, 1, "the target shape"))
        return [out(node, [wanted.get(i, d) for i, d in enumerate(x.shape)], x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, sizes = given(node, args, 2)
        return [center_crop_pad(node, np.asarray(x), sizes)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        sizes = const_input(node, graph, 1, "the target shape")
        data = (operand(graph, node.inputs[0]),)
        return [move_op(node, graph, lambda x: center_crop_pad(node, np.asarray(x), sizes), inputs=data)]

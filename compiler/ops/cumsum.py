"""CumSum and CumProd: running sums (products) along an axis (a scalar input, negative counts from the end);
`exclusive` leaves out the element itself (starting from 0, or 1), `reverse` runs from the end. One Map, one add
(multiply) per element.

Invariant: the output has the input's shape and dtype; it accumulates in that dtype, in order along the axis.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, fail, given, map_reference, normalize_axis, out, register, require


# op -> (the running function, the value an exclusive run starts from)
RUNNING: dict[str, tuple[Callable[..., np.ndarray], int]] = {"CumSum": (np.cumsum, 0), "CumProd": (np.cumprod, 1)}


def running(node: Node, x: np.ndarray, axis: ArrayLike) -> np.ndarray:
    axis = normalize_axis(node, int(np.asarray(axis).reshape(-1)[0]), x.ndim)
    function, start = RUNNING[node.op]
    work = np.flip(x, axis) if int(node.attr("reverse", 0)) else x
    result = function(work, axis=axis, dtype=x.dtype)
    if int(node.attr("exclusive", 0)):
        lead = [slice(None)] * x.ndim
        lead[axis] = slice(0, -1)
        first = np.full_like(np.take(result, [0], axis=axis), start)
        result = np.concatenate([first, result[tuple(lead)]], axis=axis)
    return np.flip(result, axis) if int(node.attr("reverse", 0)) else result


@register(*RUNNING)
class Running(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, axis = require(node, ins, 2)
        if not x.shape:
            raise fail(node, f"input {x.name!r} is a scalar; {node.op} needs rank >= 1")
        if axis.elements != 1 or axis.dtype not in (DType.int32, DType.int64):
            raise fail(node, f"axis ({axis.name!r}) must be one int32 or int64, got {axis.dtype.value} "
                             f"{list(axis.shape)}")
        known = graph.value(node.inputs[1])
        if known is not None:
            normalize_axis(node, int(np.asarray(known).reshape(-1)[0]), len(x.shape))
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, axis = given(node, args, 2)
        return [running(node, np.asarray(x), axis)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return map_reference(self, node, graph, ops_per_element=1)

"""TopK: the K largest (or smallest) elements along an axis and their int64 positions, sorted, equal values in
the order of their positions (as onnxruntime). K is an attribute before opset 10, a 1-element input after.

Lowering: the first output asked for is one Map priced as a partial sort, a heap of K per row: every element of the
row is compared against the heap's root and about log2(K) times on its way in; the other output comes out of the
same pass, so it is a Move that writes it. A K known only at run time evaluates but cannot be simulated.
Invariant: both outputs have the input's shape with K along the axis; indices are int64.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map
from compiler.ops.base import (OpDef, fail, move_op, normalize_axis, operand, out, output_operand, register,
                               require)
from compiler.ops.runtime import forget_stand_in, known_input, require_static, stand_in


def order(node: Node, x: np.ndarray, axis: int) -> np.ndarray:
    """Positions along `axis` from first to last pick: stable, so equal values keep their order."""
    if int(node.attr("largest", 1)):
        # a stable ascending sort of the reversed axis, read backwards: descending, equal values first-come
        flipped = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
        return np.flip(x.shape[axis] - 1 - flipped, axis)
    return np.argsort(x, axis=axis, kind="stable")


def topk(node: Node, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    axis = normalize_axis(node, int(node.attr("axis", -1)), x.ndim)
    if not 0 <= k <= x.shape[axis]:
        raise fail(node, f"K={k} must be between 0 and the size {x.shape[axis]} of axis {axis}")
    picks = np.take(order(node, x, axis), np.arange(k), axis=axis).astype(np.int64)
    return np.take_along_axis(x, picks, axis=axis), picks


def k_of(node: Node, value: ArrayLike | None) -> int:
    if "k" in node.attrs:
        return int(node.attrs["k"])
    values = np.asarray(value).reshape(-1)
    if values.size != 1:
        raise fail(node, f"K must hold one value, got {values.size}")
    return int(values[0])


@register("TopK")
class TopK(OpDef):
    value_inputs = (1,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        legacy = "k" in node.attrs
        x = require(node, ins, 1 if legacy else 2)[0]
        if not x.shape:
            raise fail(node, f"input {x.name!r} is a scalar; TopK needs rank >= 1")
        axis = normalize_axis(node, int(node.attr("axis", -1)), len(x.shape))
        forget_stand_in(node)
        given = None if legacy else known_input(node, graph, 1)
        if legacy or given is not None:
            k = k_of(node, given)
            if not 0 <= k <= x.shape[axis]:
                raise fail(node, f"K={k} must be between 0 and the size {x.shape[axis]} of axis {axis}")
            shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
        else:   # K known at run time: at most the whole axis
            shape = stand_in(node, x.shape, f"K (input {node.inputs[1]!r})")
        return [out(node, shape, x.dtype, 0), out(node, shape, DType.int64, 1)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return list(topk(node, np.asarray(args[0]), k_of(node, args[1] if len(args) > 1 else None)))

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        require_static(node)
        x = graph.tensor(node.inputs[0])
        axis = normalize_axis(node, int(node.attr("axis", -1)), len(x.shape))
        present = [i for i, name in enumerate(node.outputs) if name]
        k = graph.tensor(node.outputs[present[0]]).shape[axis]
        source = (operand(graph, node.inputs[0]),)   # K is a compile-time constant
        picks = {i: (lambda a, i=i: topk(node, np.asarray(a), k)[i]) for i in present}
        # per row of n: n compares with the heap root, ceil(log2(k + 1)) more for each element that enters
        per_row = x.shape[axis] * (1 + math.ceil(math.log2(k + 1)))
        first = present[0]
        suffix = f":{first}" if len(node.outputs) > 1 else ""
        search = Map(name=node.name + suffix, node=node.name, op=node.op, inputs=source,
                     output=output_operand(node, graph, first), fn=picks[first],
                     ops_per_element=max(1, math.ceil(per_row / max(k, 1))))
        # the other output comes out of the same pass: only its bytes are written
        return [search] + [move_op(node, graph, picks[i], index=i, inputs=source) for i in present[1:]]

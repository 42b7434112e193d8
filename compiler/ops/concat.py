"""Concat: join inputs along one axis (negative counts from the end). One Move reading every input once.

Invariant: inputs share rank, dtype and every dimension but the axis; the output's axis is their sum.
"""
from __future__ import annotations

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, fail, move_op, normalize_axis, out, register


@register("Concat")
class Concat(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        tensors = [t for t in ins if t is not None]
        if not ins or len(tensors) != len(ins):
            raise fail(node, f"expects 1 or more inputs, got {len(ins)} (omitted inputs are not allowed)")
        if "axis" not in node.attrs:
            raise fail(node, "attribute 'axis' is missing")
        first = tensors[0]
        rank = len(first.shape)
        axis = normalize_axis(node, int(node.attrs["axis"]), rank)
        for t in tensors[1:]:
            if t.dtype != first.dtype:
                raise fail(node, f"input {t.name!r} is {t.dtype.value}, but {first.name!r} is {first.dtype.value}")
            same = len(t.shape) == rank and all(a == b for i, (a, b) in enumerate(zip(t.shape, first.shape))
                                                 if i != axis)
            if not same:
                raise fail(node, f"input {t.name!r} has shape {list(t.shape)}, which does not match "
                                 f"{list(first.shape)} outside axis {axis}")
        shape = list(first.shape)
        shape[axis] = sum(t.shape[axis] for t in tensors)
        return [out(node, shape, first.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        arrays = [np.asarray(a) for a in args]
        return [np.concatenate(arrays, axis=int(node.attrs["axis"]))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        axis = int(node.attrs["axis"])
        return [move_op(node, graph, lambda *arrays: np.concatenate(arrays, axis=axis))]

"""ReverseSequence: for each batch entry b, reverse the first sequence_lens[b] steps along the time axis and keep
the rest. One Move (a permuting copy).

Invariant: batch_axis and time_axis are 0 or 1 and differ; sequence_lens holds one length in [0, time] per batch.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, fail, given, move_op, out, register, require


def axes(node: Node) -> tuple[int, int]:
    batch, time = int(node.attr("batch_axis", 1)), int(node.attr("time_axis", 0))
    if {batch, time} != {0, 1}:
        raise fail(node, f"batch_axis={batch} and time_axis={time} must be 0 and 1, one each")
    return batch, time


def reverse_sequence(node: Node, x: np.ndarray, lengths: ArrayLike) -> np.ndarray:
    batch, time = axes(node)
    lengths = np.asarray(lengths).astype(np.int64).reshape(-1)
    steps = x.shape[time]
    if lengths.size != x.shape[batch] or np.any((lengths < 0) | (lengths > steps)):
        raise fail(node, f"sequence_lens {lengths.tolist()} must give one length in [0, {steps}] for each of "
                         f"the {x.shape[batch]} batch entries")
    t = np.arange(steps)[:, None]                               # [time, batch]
    source = np.where(t < lengths[None, :], lengths[None, :] - 1 - t, t)
    if batch == 0:
        source = source.T                                       # [batch, time]
    grid: list[np.ndarray] = list(np.indices(x.shape[:2], sparse=True))
    grid[time] = source
    reversed_x: np.ndarray = x[tuple(grid)]
    return reversed_x


@register("ReverseSequence")
class ReverseSequence(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, lengths = require(node, ins, 2)
        batch, _ = axes(node)
        if len(x.shape) < 2:
            raise fail(node, f"input {x.name!r} has shape {list(x.shape)}; ReverseSequence needs rank >= 2")
        if lengths.dtype != DType.int64 or lengths.shape != (x.shape[batch],):
            raise fail(node, f"sequence_lens ({lengths.name!r}) must be int64 of shape [{x.shape[batch]}], got "
                             f"{lengths.dtype.value} {list(lengths.shape)}")
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, lengths = given(node, args, 2)
        return [reverse_sequence(node, np.asarray(x), lengths)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return [move_op(node, graph, lambda x, lengths: reverse_sequence(node, np.asarray(x), lengths))]

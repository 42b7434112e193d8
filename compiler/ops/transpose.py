"""Transpose: permute axes (default: reverse them). One Move; a view when only size-1 axes change place.

Invariant: output dim i = input dim perm[i].
"""
from __future__ import annotations

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, fail, move_op, out, register, require


def permutation(node: Node, rank: int) -> tuple[int, ...]:
    perm = node.attr("perm")
    if perm is None:
        return tuple(reversed(range(rank)))
    perm = tuple(int(p) for p in perm)
    if sorted(perm) != list(range(rank)):
        raise fail(node, f"perm {list(perm)} is not a permutation of 0..{rank - 1} (the input rank is {rank})")
    return perm


@register("Transpose")
class Transpose(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        shape = x.shape
        return [out(node, [shape[p] for p in permutation(node, len(shape))], x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        return [np.transpose(x, permutation(node, x.ndim))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        shape = graph.tensor(node.inputs[0]).shape
        perm = permutation(node, len(shape))
        # e.g. [1, 64, 1, 8] with perm (2, 1, 0, 3): the 64 and 8 axes keep their order, so the bytes
        # are already laid out as the output wants them and nothing moves.
        kept = [p for p in perm if shape[p] != 1]
        return [move_op(node, graph, lambda x: np.transpose(x, perm), view=kept == sorted(kept))]

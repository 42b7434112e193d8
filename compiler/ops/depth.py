"""SpaceToDepth and DepthToSpace on NCHW: move blocksize x blocksize pixel blocks into channels and back.
Channels are ordered depth-column-row (DCR, the default) or column-row-depth (CRD; SpaceToDepth from opset 25).
One Move each.

Invariant: SpaceToDepth needs H and W divisible by the block; DepthToSpace needs C divisible by its square.
"""
from __future__ import annotations

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, fail, move_op, out, register, require


def block(node: Node) -> int:
    size = node.attr("blocksize")
    if size is None or int(size) < 1:
        raise fail(node, f"attribute blocksize must be an integer >= 1, got {size}")
    return int(size)


def mode(node: Node) -> str:
    name = str(node.attr("mode", "DCR"))
    if name not in ("DCR", "CRD"):
        raise fail(node, f"mode={name!r} is not supported (allowed: DCR, CRD)")
    return name


def rearrange(node: Node, x: np.ndarray) -> np.ndarray:
    b = block(node)
    n, c, h, w = x.shape
    if node.op == "SpaceToDepth":
        blocks = x.reshape(n, c, h // b, b, w // b, b)
        blocks = blocks.transpose(0, 3, 5, 1, 2, 4) if mode(node) == "DCR" else blocks.transpose(0, 1, 3, 5, 2, 4)
        return blocks.reshape(n, c * b * b, h // b, w // b)
    if mode(node) == "DCR":
        blocks = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        blocks = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return blocks.reshape(n, c // (b * b), h * b, w * b)


@register("SpaceToDepth", "DepthToSpace")
class DepthSpace(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        b = block(node)
        mode(node)
        if len(x.shape) != 4:
            raise fail(node, f"input {x.name!r} has shape {list(x.shape)}; {node.op} needs NCHW (rank 4)")
        n, c, h, w = x.shape
        if node.op == "SpaceToDepth":
            if h % b or w % b:
                raise fail(node, f"H={h} and W={w} must be divisible by blocksize {b}")
            return [out(node, (n, c * b * b, h // b, w // b), x.dtype)]
        if c % (b * b):
            raise fail(node, f"C={c} must be divisible by blocksize squared ({b * b})")
        return [out(node, (n, c // (b * b), h * b, w * b), x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [rearrange(node, np.asarray(args[0]))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return [move_op(node, graph, lambda x: rearrange(node, np.asarray(x)))]

"""BitCast (opset 26): the same bits read as another element type of the same width -> a view (no byte moves).

Invariant: the output has the input's shape; each element's bit pattern is kept (float32 1.0 becomes int32
1065353216). Types narrower than a byte (int4, fp4...) are refused: their packing is not one element per word.
"""
from __future__ import annotations

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, fail, given, move_op, out, register, require


def _storage(dtype: DType) -> np.dtype:
    """The numpy type whose bits a value of `dtype` has (bf16 as ml_dtypes.bfloat16, not its float32 holder)."""
    return np.dtype(dtype.narrow or dtype.numpy)


def _bitcast(x: np.ndarray, source: DType, target: DType) -> np.ndarray:
    bits = np.asarray(x).astype(_storage(source)).view(_storage(target))
    return bits.astype(target.numpy)


@register("BitCast")
class BitCast(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        if node.attr("to") is None:
            raise fail(node, "attribute 'to' (the target element type) is missing")
        target = DType.from_onnx(int(node.attr("to")), node.where())
        for dtype in (x.dtype, target):
            if dtype.bits < 8 or dtype in (DType.ternary, DType.tf32):
                raise fail(node, f"{dtype.value} is not supported by BitCast here (types of a byte or more)")
        if x.dtype.bits != target.bits:
            raise fail(node, f"BitCast keeps the width: {x.dtype.value} is {x.dtype.bits} bits, "
                             f"{target.value} is {target.bits}")
        node.resolved["bitcast"] = (x.dtype, target)
        return [out(node, x.shape, target)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        source, target = node.resolved["bitcast"]
        return [_bitcast(given(node, args, 1)[0], source, target)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        source, target = node.resolved["bitcast"]
        return [move_op(node, graph, lambda x: _bitcast(x, source, target), view=True)]
